//! `tempora-load plot`: PNG charts of `compare` results, throughput and p99
//! latency of each workload against the store's size, one line per system.
//! When a size was run more than once, the last run counts; of a run with
//! several rounds of a step (`compare --rounds`), the median round.

use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::compare::Rounds;

#[derive(clap::Args, Debug)]
pub struct PlotArgs {
    /// JSON Lines written by `compare --out`.
    #[arg(long)]
    pub input: PathBuf,
    /// Where `throughput.png` and `p99.png` go.
    #[arg(long)]
    pub out_dir: PathBuf,
    /// A TrueType font for the labels (plotters draws text itself).
    #[arg(long, default_value = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")]
    pub font: PathBuf,
}

const SYSTEMS: [(&str, RGBColor); 3] =
    [("tempora", RGBColor(0, 114, 178)), ("postgres", RGBColor(213, 94, 0)), ("mariadb", RGBColor(0, 158, 115))];

const TITLES: [(&str, &str); 5] = [
    ("w1", "W1 assert with supersession"),
    ("w2", "W2 current point read"),
    ("w3", "W3 point read as of (record + valid time)"),
    ("w4", "W4 subject history"),
    ("w5", "W5 bulk import (facts/s)"),
];

/// (workload, system) → size → value.
type Series = BTreeMap<(String, String), BTreeMap<u64, f64>>;

pub fn plot(args: PlotArgs) -> Result<()> {
    register_font(&args.font)?;
    let text = std::fs::read_to_string(&args.input).with_context(|| format!("reading {}", args.input.display()))?;
    let (tput, p99) = series(&text)?;
    if tput.is_empty() {
        bail!("{} holds no results", args.input.display());
    }
    std::fs::create_dir_all(&args.out_dir)?;
    let t = args.out_dir.join("throughput.png");
    grid(&t, &tput, &TITLES, "operations/s (higher is better)")?;
    let p = args.out_dir.join("p99.png");
    grid(&p, &p99, &TITLES[..4], "p99 latency, ms (lower is better)")?;
    println!("wrote {} and {}", t.display(), p.display());
    Ok(())
}

/// The points to draw: of each workload, system and size, the median round
/// of the last run (a line without a `run` is a run of its own).
fn series(text: &str) -> Result<(Series, Series)> {
    let mut steps: BTreeMap<(String, String, u64), Vec<Value>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).with_context(|| format!("not a result line: {line}"))?;
        let (Some(w), Some(s), Some(size)) = (r["workload"].as_str(), r["system"].as_str(), r["size"].as_u64()) else {
            continue;
        };
        let runs = steps.entry((w.to_string(), s.to_string(), size)).or_default();
        // Another run (or a line of no run) replaces what the last one recorded.
        if runs.last().is_some_and(|last| r["run"].is_null() || last["run"] != r["run"]) {
            runs.clear();
        }
        runs.push(r);
    }
    let (mut tput, mut p99) = (Series::new(), Series::new());
    for ((w, s, size), runs) in &steps {
        let Some(rounds) = Rounds::of(runs.iter().collect()) else { continue };
        let key = (w.clone(), s.clone());
        if let Some(t) = rounds.median["throughput_per_s"].as_f64() {
            tput.entry(key.clone()).or_default().insert(*size, t);
        }
        if let Some(p) = rounds.median["p99_ms"].as_f64() {
            p99.entry(key).or_default().insert(*size, p);
        }
    }
    Ok((tput, p99))
}

/// plotters draws text itself, with a font registered as `sans-serif`.
pub fn register_font(path: &std::path::Path) -> Result<()> {
    let font = std::fs::read(path).with_context(|| format!("reading the font {}", path.display()))?;
    plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(font.into_boxed_slice()))
        .map_err(|_| anyhow::anyhow!("{} is not a usable TrueType font", path.display()))
}

/// One panel per workload (size on a log axis, the value on a linear one from
/// zero, so heights compare as ratios), a line per system.
fn grid(path: &PathBuf, series: &Series, titles: &[(&str, &str)], y_label: &str) -> Result<()> {
    let root = BitMapBackend::new(path, (1200, 330 * titles.len().div_ceil(2) as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((titles.len().div_ceil(2), 2));
    for (panel, (w, title)) in panels.iter().zip(titles) {
        let lines: Vec<(&str, RGBColor, &BTreeMap<u64, f64>)> = SYSTEMS
            .iter()
            .filter_map(|(s, c)| series.get(&(w.to_string(), s.to_string())).map(|m| (*s, *c, m)))
            .collect();
        let points = lines.iter().flat_map(|l| l.2.iter());
        let (mut x0, mut x1, mut y1) = (u64::MAX, 0u64, 0f64);
        for (&x, &y) in points {
            (x0, x1, y1) = (x0.min(x), x1.max(x), y1.max(y));
        }
        if lines.is_empty() || y1 <= 0.0 {
            continue;
        }
        let (x0, x1) = (x0 as f64 / 2.0, x1 as f64 * 2.0);
        let mut chart = ChartBuilder::on(panel)
            .caption(*title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d((x0..x1).log_scale(), 0f64..y1 * 1.15)?;
        chart
            .configure_mesh()
            .x_labels(6)
            .y_labels(6)
            .light_line_style(TRANSPARENT)
            .x_desc("facts in the store")
            .y_desc(y_label)
            .x_label_formatter(&|x| human(*x))
            .y_label_formatter(&|y| human(*y))
            .label_style(("sans-serif", 12))
            .draw()?;
        for (name, color, m) in lines {
            let pts: Vec<(f64, f64)> = m.iter().map(|(&x, &y)| (x as f64, y)).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .position(SeriesLabelPosition::LowerLeft)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

fn human(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{}M", trim(v / 1e6)),
        v if v >= 1e3 => format!("{}k", trim(v / 1e3)),
        v if v >= 1.0 => trim(v),
        v => format!("{v:.2}"),
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(String::from).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(run: Option<i64>, w: &str, s: &str, size: u64, tput: f64, p99: f64) -> String {
        let mut v =
            serde_json::json!({"workload": w, "system": s, "size": size, "throughput_per_s": tput, "p99_ms": p99});
        if let Some(run) = run {
            v["run"] = run.into();
        }
        v.to_string()
    }

    #[test]
    fn a_step_draws_the_median_round_of_its_last_run() {
        let text = [
            line(None, "w2", "tempora", 1000, 10.0, 9.0),
            line(Some(1), "w2", "tempora", 1000, 20.0, 8.0),
            // The later run's three rounds: the median is 30 (p99 5), not the
            // last round (50) nor the mean.
            line(Some(2), "w2", "tempora", 1000, 50.0, 1.0),
            line(Some(2), "w2", "postgres", 1000, 7.0, 2.0),
            line(Some(2), "w2", "tempora", 1000, 30.0, 5.0),
            line(Some(2), "w2", "tempora", 1000, 25.0, 6.0),
            line(Some(2), "w2", "tempora", 10_000, 40.0, 3.0),
        ]
        .join("\n");
        let (tput, p99) = series(&text).unwrap();
        let t = &tput[&("w2".to_string(), "tempora".to_string())];
        assert_eq!((t[&1000], t[&10_000]), (30.0, 40.0));
        assert_eq!(p99[&("w2".to_string(), "tempora".to_string())][&1000], 5.0);
        assert_eq!(tput[&("w2".to_string(), "postgres".to_string())][&1000], 7.0);
    }

    #[test]
    fn of_two_rounds_the_median_is_the_slower_and_the_range_spans_both() {
        let a = serde_json::json!({"throughput_per_s": 52_000.0});
        let b = serde_json::json!({"throughput_per_s": 41_000.0});
        let r = Rounds::of(vec![&a, &b]).unwrap();
        assert_eq!((r.median["throughput_per_s"].as_f64(), r.min, r.max, r.n), (Some(41_000.0), 41_000.0, 52_000.0, 2));
        assert!(Rounds::of(Vec::new()).is_none());
    }
}
