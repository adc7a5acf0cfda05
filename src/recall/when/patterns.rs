//! The recognisers: each reads one kind of time expression starting at a
//! token and says where it ends. The scan keeps, at each position, the
//! longest expression any of them reads there.

use super::calendar::{self as cal, Clock, Interval, Part, OPEN_END, OPEN_START};
use super::words::{self, Season, Unit, Words};

/// Words that, up to four words before "up to", make it "doing" ("what was
/// Sam up to", "what have you been up to"), not "until".
const DOING_UP_TO: &[&str] =
    &["am", "are", "be", "been", "being", "get", "gets", "getting", "got", "is", "s", "was", "were"];

/// An expression read at a position: the interval it names and the token after it.
pub(super) struct Found {
    pub iv: Interval,
    pub end: usize,
}

/// The longest expression starting at token `i`, if any.
pub(super) fn longest_at(w: &Words, i: usize, now: &Clock) -> Option<Found> {
    let p = Reader { w, now };
    let found = [p.open_range(i), p.range(i), p.lead(i)];
    found.into_iter().flatten().fold(None, |best: Option<Found>, f| match best {
        Some(b) if b.end >= f.end => Some(b),
        _ => Some(f),
    })
}

/// How far the words before a month or season name vouch for it being one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cue {
    /// "in", "during", "since", "mid-", "the end of": a month follows, whatever its case.
    Strong,
    /// "this", "last", "next", "early", "late": "May", "March" and "August"
    /// need their capital ("this may be", "leaving early may help").
    Weak,
    /// The other end of a range ("March-May 2024"): taken if that end is vouched for.
    Loose,
    Absent,
}

/// Which of the named periods a name without a year means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rel {
    /// "May", "in the fall": the latest one starting at or before now.
    Plain,
    /// "last May": the latest one over by now.
    Last,
    /// "this May": the one holding now, else the one of the current year.
    This,
    /// "next May": the first one starting after now.
    Next,
}

/// A period that recurs every year.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Year,
    Month(u8),
    Day(u8, u8),
    Season(Season),
}

/// A yearly period, with its year if the question gave one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Dated {
    pub(super) shape: Shape,
    pub(super) year: Option<i32>,
    pub(super) rel: Rel,
    pub(super) part: Option<Part>,
}

impl Dated {
    pub(super) fn new(shape: Shape, year: Option<i32>) -> Dated {
        Dated { shape, year, rel: Rel::Plain, part: None }
    }

    /// Without a year, its meaning depends on when it is asked (or on the other end of a range).
    fn open(&self) -> bool {
        self.year.is_none() && self.rel == Rel::Plain
    }

    fn in_year(&self, y: i32) -> Option<Interval> {
        let whole = match self.shape {
            Shape::Year => cal::year(y),
            Shape::Month(m) => cal::months(y, i32::from(m), 1),
            Shape::Day(m, d) => cal::day(cal::date(y, m, d)?),
            Shape::Season(s) => cal::season(y, s),
        }?;
        match self.part {
            Some(p) => cal::part_of(p, whole),
            None => Some(whole),
        }
    }

    /// The years around `y`, latest first (9 back reaches every 29 February).
    fn back_from(&self, y: i32) -> impl Iterator<Item = Interval> + '_ {
        (y - 9..=y + 1).rev().filter_map(move |y| self.in_year(y))
    }

    fn latest_from_or_before(&self, at: i64) -> Option<Interval> {
        let y = i32::from(cal::civil(at)?.year());
        self.back_from(y).find(|iv| iv.from <= at)
    }

    fn earliest_from_or_after(&self, at: i64) -> Option<Interval> {
        let y = i32::from(cal::civil(at)?.year());
        (y - 1..=y + 9).filter_map(|y| self.in_year(y)).find(|iv| iv.from >= at)
    }

    fn resolve(&self, now: &Clock) -> Option<Interval> {
        if let Some(y) = self.year {
            return self.in_year(y);
        }
        let y = now.year();
        match self.rel {
            Rel::Plain => self.latest_from_or_before(now.ms),
            Rel::Last => self.back_from(y).find(|iv| iv.until <= now.ms),
            Rel::This => self.back_from(y).find(|iv| iv.contains(now.ms)).or_else(|| self.in_year(y)),
            Rel::Next => (y - 1..=y + 9).filter_map(|y| self.in_year(y)).find(|iv| iv.from > now.ms),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expr {
    /// Resolved already (relative expressions, decades).
    Fixed(Interval),
    Dated(Dated),
    /// A day of the month that borrows its month from the other end of a range ("3-10 May").
    DayNum {
        day: u8,
        year: Option<i32>,
    },
}

pub(super) struct Parsed {
    pub(super) expr: Expr,
    pub(super) end: usize,
    /// Read only because it stands at the end of a range (`Cue::Loose`).
    pub(super) loose: bool,
}

impl Parsed {
    pub(super) fn new(expr: Expr, end: usize) -> Option<Parsed> {
        Some(Parsed { expr, end, loose: false })
    }

    pub(super) fn fixed(iv: Option<Interval>, end: usize) -> Option<Parsed> {
        Parsed::new(Expr::Fixed(iv?), end)
    }
}

/// Two names of one kind, the first without a year ("May and June 2024",
/// "May and June"): read together, the first takes the second's year.
fn one_kind(l: &Expr, r: &Expr) -> bool {
    match (l, r) {
        (Expr::Dated(l), Expr::Dated(r)) => {
            l.open()
                && l.part.is_none()
                && r.part.is_none()
                && match (l.shape, r.shape) {
                    (Shape::Month(_), Shape::Month(_)) | (Shape::Day(..), Shape::Day(..)) => true,
                    (Shape::Season(_), Shape::Season(_)) => true,
                    _ => false,
                }
        }
        (Expr::DayNum { .. }, Expr::Dated(d)) | (Expr::Dated(d), Expr::DayNum { .. }) => {
            matches!(d.shape, Shape::Day(..))
        }
        _ => false,
    }
}

/// The longest of several readings; the first on a tie.
pub(super) fn longest<const N: usize>(all: [Option<Parsed>; N]) -> Option<Parsed> {
    all.into_iter().flatten().fold(None, |best: Option<Parsed>, p| match best {
        Some(b) if b.end >= p.end => Some(b),
        _ => Some(p),
    })
}

/// Lead-in words that belong to the expression (and leave the full-text query with it).
pub(super) const APPROXIMATELY: &[&str] = &["around", "about", "circa", "approximately", "roughly", "sometime", "back"];
pub(super) const PREPOSITIONS: &[&str] = &["in", "on", "during", "over", "throughout", "within", "for", "at"];
/// Words after which a month or season name is one whatever its case.
#[rustfmt::skip]
pub(super) const STRONG_CUES: &[&str] = &[
    "in", "during", "by", "since", "until", "till", "til", "through", "throughout", "from", "between", "before",
    "after", "mid", "over",
];
pub(super) const WEAK_CUES: &[&str] = &["this", "last", "next", "early", "late"];
/// "of" cues a month after these ("the end of May", "the month of May"), not after others ("a photo of June").
#[rustfmt::skip]
pub(super) const PART_NOUNS: &[&str] = &[
    "beginning", "start", "end", "middle", "week", "half", "quarter", "rest", "part", "month", "course",
];
/// Words after which a bare 4-digit number is a year even outside 1900-2100.
#[rustfmt::skip]
pub(super) const YEAR_CUES: &[&str] = &[
    "in", "during", "of", "since", "until", "till", "before", "after", "by", "from", "between", "year", "circa",
    "around", "early", "mid", "late", "through", "-",
];
pub(super) const DAY_PARTS: &[&str] = &["morning", "afternoon", "evening"];

enum Open {
    Since,
    Until,
    Before,
    After,
    From,
}

pub(super) struct Reader<'a, 'q> {
    pub(super) w: &'a Words<'q>,
    pub(super) now: &'a Clock,
}

impl Reader<'_, '_> {
    fn resolve(&self, e: Expr) -> Option<Interval> {
        match e {
            Expr::Fixed(iv) => Some(iv),
            Expr::Dated(d) => d.resolve(self.now),
            Expr::DayNum { .. } => None,
        }
    }

    // ---- the three top-level forms -------------------------------------

    /// Where an expression may start after a lead-in at `i`: `i` itself,
    /// after "around" (and the like), after a preposition.
    fn lead_in_starts(&self, i: usize) -> Vec<usize> {
        let w = self.w;
        let mut starts = vec![i];
        let mut j = i;
        if w.any(j, APPROXIMATELY) {
            j += 1;
            starts.push(j);
        }
        if w.any(j, PREPOSITIONS) {
            starts.push(j + 1);
        }
        starts
    }

    /// An expression with its lead-in: "in May", "around 2020", "on the 7th of May".
    /// "X onwards" opens it to the future.
    fn lead(&self, i: usize) -> Option<Found> {
        let w = self.w;
        let starts = self.lead_in_starts(i);
        let a = starts.into_iter().rev().find_map(|s| self.atom(s, None))?;
        let iv = self.resolve(a.expr)?;
        if w.any(a.end, &["onward", "onwards"]) {
            return Some(Found { iv: Interval::new(iv.from, OPEN_END)?, end: a.end + 1 });
        }
        Some(Found { iv, end: a.end })
    }

    /// "since March", "until June 2023", "before 2020", "after June 2023",
    /// "by May", "pre-2020", "from 2020 on". Open ends are `OPEN_START` / `OPEN_END`;
    /// "since" ends now; "until" and "by" include the period they name.
    fn open_range(&self, i: usize) -> Option<Found> {
        let w = self.w;
        let glued_dash = |k: usize| w.any(k, &["-", "–"]) && w.glued(k);
        let (how, j) = if let Some(j) = w.seq(i, &["ever", "since"]).or_else(|| w.seq(i, &["since"])) {
            (Open::Since, j)
        } else if let Some(j) = (w.seq(i, &["up", "to"]).or_else(|| w.seq(i, &["up", "until"])))
            .filter(|_| !(i.saturating_sub(4)..i).any(|k| w.any(k, DOING_UP_TO)))
        {
            // "up to June" is until June; "what was Sam up to last month"
            // asks what Sam did then.
            (Open::Until, j)
        } else if w.any(i, &["until", "till", "til", "through", "thru", "by"]) {
            (Open::Until, i + 1)
        } else if let Some(j) = w.seq(i, &["prior", "to"]).or_else(|| w.seq(i, &["earlier", "than"])) {
            (Open::Before, j)
        } else if w.is(i, "before") || (w.is(i, "pre") && glued_dash(i + 1)) {
            (Open::Before, if w.is(i, "pre") { i + 2 } else { i + 1 })
        } else if let Some(j) = w.seq(i, &["later", "than"]) {
            (Open::After, j)
        } else if w.is(i, "after") || (w.is(i, "post") && glued_dash(i + 1)) {
            (Open::After, if w.is(i, "post") { i + 2 } else { i + 1 })
        } else if w.is(i, "from") {
            (Open::From, i + 1)
        } else {
            return None;
        };
        let a = self.atom(j, Some(Cue::Strong))?;
        let iv = self.resolve(a.expr)?;
        let now = self.now.ms;
        let (iv, end) = match how {
            // Since a period that has not begun yet: that period.
            Open::Since if iv.from >= now => (iv, a.end),
            Open::Since => (Interval::new(iv.from, now)?, a.end),
            Open::Until => (Interval::new(OPEN_START, iv.until)?, a.end),
            Open::Before => (Interval::new(OPEN_START, iv.from)?, a.end),
            Open::After => (Interval::new(iv.until, OPEN_END)?, a.end),
            Open::From if w.any(a.end, &["on", "onward", "onwards"]) => (Interval::new(iv.from, OPEN_END)?, a.end + 1),
            Open::From => return None,
        };
        Some(Found { iv, end })
    }

    /// "from March to May 2024", "between 2019 and 2021", "March-May 2024",
    /// "3-10 May 2023", "May 3-10, 2023", "2019-21". An end without a year
    /// takes the other's: the start is the latest such period starting at or
    /// before the end, the end the first starting at or after the start.
    fn range(&self, i: usize) -> Option<Found> {
        self.lead_in_starts(i).into_iter().rev().find_map(|s| self.range_from(s))
    }

    fn range_from(&self, i: usize) -> Option<Found> {
        let w = self.w;
        const DASHES: &[&str] = &["-", "–", "—"];
        let (j, joins): (usize, &[&str]) = if w.is(i, "from") {
            (i + 1, &["to", "till", "until", "til", "through", "thru", "-", "–", "—"])
        } else if w.is(i, "between") {
            (i + 1, &["and", "-", "–", "—"])
        } else {
            (i, &["to", "through", "thru", "-", "–", "—", "and", "or", "&"])
        };
        // Without "from" or "between", the left end is vouched for by the
        // words before it ("in March-May") or, failing that, by the right end.
        let cue = if j > i { Some(Cue::Strong) } else { None };
        let left = longest([self.atom(j, cue), self.day_num_alone(j)])
            .or_else(|| if j == i { self.atom(j, Some(Cue::Loose)) } else { None })?;
        let k = left.end;
        if !w.any(k, joins) {
            return None;
        }
        let short_year = if DASHES.contains(&w.at(k)) { self.short_year(&left, k + 1) } else { None };
        let right = short_year
            .or_else(|| self.now_word(k + 1))
            .or_else(|| longest([self.atom(k + 1, Some(Cue::Loose)), self.day_num_alone(k + 1)]))?;
        if left.loose && right.loose {
            return None;
        }
        // "May and June 2024", "3 or 4 May": a list of names of one kind sharing a year.
        if j == i && w.any(k, &["and", "or", "&"]) && !one_kind(&left.expr, &right.expr) {
            return None;
        }
        Some(Found { iv: self.join(left.expr, right.expr)?, end: right.end })
    }

    /// "now", "(the) present", "date" at the end of a range ("from May 2024 to now").
    fn now_word(&self, k: usize) -> Option<Parsed> {
        let w = self.w;
        let end = if w.any(k, &["now", "present", "date"]) { k + 1 } else { w.seq(k, &["the", "present"])? };
        let now = self.now.ms;
        Parsed::fixed(Interval::new(now, now.checked_add(1)?), end)
    }

    /// "21" in "2019-21": a year of the same century after the left one.
    fn short_year(&self, left: &Parsed, k: usize) -> Option<Parsed> {
        let Expr::Dated(Dated { shape: Shape::Year, year: Some(y), part: None, .. }) = left.expr else {
            return None;
        };
        let (nn, 2) = self.w.num(k)? else { return None };
        let y2 = y - y.rem_euclid(100) + nn as i32;
        (self.w.glued(k) && y2 > y && self.right_clean(k + 1)).then_some(Parsed {
            expr: Expr::Dated(Dated::new(Shape::Year, Some(y2))),
            end: k + 1,
            loose: false,
        })
    }

    pub(super) fn join(&self, l: Expr, r: Expr) -> Option<Interval> {
        // A bare day borrows the month (and year) of the other end.
        let (l, r) = match (l, r) {
            (Expr::DayNum { day, year }, Expr::Dated(d @ Dated { shape: Shape::Day(m, _), .. })) => {
                (Expr::Dated(Dated { shape: Shape::Day(m, day), year: d.year.or(year), ..d }), r)
            }
            (Expr::Dated(d @ Dated { shape: Shape::Day(m, _), .. }), Expr::DayNum { day, year }) => (
                Expr::Dated(Dated { year: d.year.or(year), ..d }),
                Expr::Dated(Dated { shape: Shape::Day(m, day), year: year.or(d.year), ..d }),
            ),
            (Expr::DayNum { .. }, _) | (_, Expr::DayNum { .. }) => return None,
            both => both,
        };
        let open = |e: &Expr| matches!(e, Expr::Dated(d) if d.open());
        let (li, ri) = match (l, r) {
            (Expr::Dated(ld), _) if ld.open() => {
                let ri = self.resolve(r)?;
                (ld.latest_from_or_before(ri.from)?, ri)
            }
            (_, Expr::Dated(rd)) if rd.open() && !open(&l) => {
                let li = self.resolve(l)?;
                (li, rd.earliest_from_or_after(li.from)?)
            }
            _ => (self.resolve(l)?, self.resolve(r)?),
        };
        // Ends given the wrong way round: the whole of both.
        Interval::new(li.from, ri.until).or(Some(li.hull(ri)))
    }

    // ---- one expression --------------------------------------------------

    /// One time expression at `i`, with an optional leading "the". `cue`
    /// overrides what the words before a month or season name say.
    fn atom(&self, i: usize, cue: Option<Cue>) -> Option<Parsed> {
        if self.w.is(i, "the") {
            return self.after_the(i + 1, cue);
        }
        longest([self.part(i, cue), self.core(i, cue)])
    }

    /// The expressions that take a "the" (which then belongs to them): "the
    /// day before yesterday", "the past 3 days", "the end of May", "the 7th of
    /// May", "the summer of 2023", "the year 2019", "the 1990s". Other words
    /// after a "the" are read without it ("the 2024 election").
    fn after_the(&self, j: usize, cue: Option<Cue>) -> Option<Parsed> {
        longest([
            self.part(j, cue),
            self.named_day(j),
            self.past_n(j, true),
            self.the_weekend(j),
            self.before_last(j),
            self.day_month(j),
            self.season(j, cue),
            self.year(j).filter(|_| self.w.is(j, "year")),
            self.decade(j, true),
        ])
    }

    /// An expression without a part or a "the" in front.
    fn core(&self, j: usize, cue: Option<Cue>) -> Option<Parsed> {
        longest([
            self.named_day(j),
            self.this_last_next(j),
            self.ago(j),
            self.past_n(j, false),
            self.earlier_this(j),
            self.weekday(j),
            self.with_weekday(j),
            self.iso_date(j),
            self.day_month(j),
            self.month_day(j),
            self.month_year(j),
            self.month_alone(j, cue),
            self.season(j, cue),
            self.quarter(j),
            self.year(j),
            self.decade(j, false),
        ])
    }

    /// "early 2023", "mid-May", "late summer", "the beginning of May", "the end of
    /// last month", "the first half of 2023", "the last week of March 2024",
    /// "the third quarter of 2024".
    fn part(&self, j: usize, cue: Option<Cue>) -> Option<Parsed> {
        let w = self.w;
        let thirds = |word: &str| match word {
            "early" => Some(Part::Early),
            "mid" => Some(Part::Mid),
            "late" => Some(Part::Late),
            _ => None,
        };
        let (part, k, part_cue) = if let Some(p) = thirds(w.at(j)) {
            let mut k = j + 1;
            let joined = w.any(k, &["-", "–"]) || w.is(k, "in");
            if joined {
                k += 1;
            }
            // "leaving early may help": after "early" or "late", "may" stays a
            // verb unless capitalised or the words before vouch ("in early may").
            let outer = cue.unwrap_or_else(|| self.cue_of(j));
            (p, k, if joined || p == Part::Mid || outer == Cue::Strong { Cue::Strong } else { Cue::Weak })
        } else if let Some(k) = w.seq(j, &["beginning", "of"]).or_else(|| w.seq(j, &["start", "of"])) {
            (Part::Early, k, Cue::Strong)
        } else if let Some(k) = w.seq(j, &["middle", "of"]) {
            (Part::Mid, k, Cue::Strong)
        } else if let Some(k) = w.seq(j, &["end", "of"]) {
            (Part::End, k, Cue::Strong)
        } else {
            let (rank, k) = self.rank(j)?;
            let part = match w.at(k) {
                "half" if rank <= 2 => Part::Half(rank),
                "half" if rank == 5 => Part::Half(2),
                "quarter" => Part::Quarter(rank.min(4)),
                "week" => Part::Week(rank),
                _ => return None,
            };
            (part, w.seq(k + 1, &["of"])?, Cue::Strong)
        };
        // "the end of the year", "the beginning of the month": the current one.
        let current = match (w.at(k), w.at(k + 1)) {
            ("the", "year") => Parsed::fixed(cal::unit_this(self.now, Unit::Year, 0), k + 2),
            ("the", "month") => Parsed::fixed(cal::unit_this(self.now, Unit::Month, 0), k + 2),
            _ => None,
        };
        let cue = Some(cue.filter(|&c| c == Cue::Loose).unwrap_or(part_cue));
        let base = current.or_else(|| self.atom(k, cue))?;
        let expr = match base.expr {
            Expr::Dated(d) if d.part.is_none() => {
                let d = Dated { part: Some(part), ..d };
                d.resolve(self.now)?;
                Expr::Dated(d)
            }
            Expr::Fixed(iv) => Expr::Fixed(cal::part_of(part, iv)?),
            _ => return None,
        };
        Some(Parsed { expr, end: base.end, loose: base.loose })
    }

    /// "first" .. "fourth", "last", "1st" .. "4th".
    fn rank(&self, j: usize) -> Option<(u8, usize)> {
        let w = self.w;
        if let Some(r) = words::rank(w.at(j)) {
            return Some((r, j + 1));
        }
        let (n, 1) = w.num(j)? else { return None };
        (1..=4).contains(&n).then_some(())?;
        (w.glued(j + 1) && words::ordinal_suffix(w.at(j + 1))).then_some((n as u8, j + 2))
    }
}
