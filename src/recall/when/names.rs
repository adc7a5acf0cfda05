//! Calendar names: dates ("7 May 2023", "2023-05-07"), months, seasons,
//! quarters, years and decades, and the numbers in them.

use super::calendar::{self as cal, Part};
use super::patterns::{
    longest, Cue, Dated, Expr, Parsed, Reader, Shape, PART_NOUNS, STRONG_CUES, WEAK_CUES, YEAR_CUES,
};
use super::words::{self, Kind};

impl Reader<'_, '_> {
    /// "Friday, 3 May 2024", "Fri May 3": a weekday in front of a date goes with it.
    pub(super) fn with_weekday(&self, j: usize) -> Option<Parsed> {
        let w = self.w;
        let word = w.at(j);
        if words::weekday(word).is_none() && !words::weekday_short(word) {
            return None;
        }
        let mut k = j + 1;
        if w.is(k, ".") && w.glued(k) {
            k += 1;
        }
        if w.is(k, ",") {
            k += 1;
        }
        longest([self.day_month(k), self.month_day(k), self.iso_date(k)])
    }

    /// "2023-05-07", "2023/05/07" (and a time glued after it: "2023-05-07T10:00Z").
    pub(super) fn iso_date(&self, j: usize) -> Option<Parsed> {
        let w = self.w;
        let (y, 4) = w.num(j)? else { return None };
        let sep = w.at(j + 1);
        if !(1000..=2999).contains(&y) || !matches!(sep, "-" | "/") || !self.left_clean(j) {
            return None;
        }
        let (m, md) = w.num(j + 2)?;
        let (d, dd) = w.num(j + 4)?;
        let glued = (1..=4).all(|k| w.glued(j + k));
        if !glued || !w.is(j + 3, sep) || md > 2 || dd > 2 {
            return None;
        }
        cal::date(y as i32, u8::try_from(m).ok()?, u8::try_from(d).ok()?)?;
        let mut end = j + 5;
        if w.is(end, "t") && w.glued(end) {
            while w.glued(end) {
                end += 1;
            }
        } else if !self.right_clean(end) {
            return None;
        }
        let day = Shape::Day(m as u8, d as u8);
        Parsed::new(Expr::Dated(Dated::new(day, Some(y as i32))), end)
    }

    /// "7 May 2023", "7th of May", "the 7th of May 2023", "7 May, 2023".
    pub(super) fn day_month(&self, j: usize) -> Option<Parsed> {
        let (d, mut k) = self.day_num(j)?;
        if self.w.is(k, "of") {
            k += 1;
        }
        let (m, k, _) = self.month_name(k)?;
        self.dated_day(m, d, k)
    }

    /// "May 7, 2023", "May 7th 2023", "May the 7th", "Sept. 7".
    pub(super) fn month_day(&self, j: usize) -> Option<Parsed> {
        let (m, mut k, _) = self.month_name(j)?;
        if self.w.is(k, "the") {
            k += 1;
        }
        let (d, k) = self.day_num(k)?;
        if self.w.is(k, "of") {
            return None; // "May 2 of us come?"
        }
        self.dated_day(m, d, k)
    }

    /// Day `d` of month `m`, then an optional ", 2023".
    fn dated_day(&self, m: u8, d: u8, k: usize) -> Option<Parsed> {
        cal::date(2000, m, d)?; // a day some year has (29 February included)
        let at = if self.w.is(k, ",") { k + 1 } else { k };
        let (year, end) = match self.year_num(at, true) {
            Some((y, e)) => (Some(y), e),
            None => (None, k),
        };
        Parsed::new(Expr::Dated(Dated::new(Shape::Day(m, d), year)), end)
    }

    /// "May 2024", "May of 2024", "Sept. 2023".
    pub(super) fn month_year(&self, j: usize) -> Option<Parsed> {
        let (m, mut k, _) = self.month_name(j)?;
        if self.w.any(k, &[",", "of"]) {
            k += 1;
        }
        let (y, end) = self.year_num(k, true)?;
        Parsed::new(Expr::Dated(Dated::new(Shape::Month(m), Some(y))), end)
    }

    /// "in May", "during March": a full month name the words before vouch for.
    pub(super) fn month_alone(&self, j: usize, cue: Option<Cue>) -> Option<Parsed> {
        let (m, k, true) = self.month_name(j)? else { return None };
        let loose = self.cue_ok(j, m, cue)?;
        Some(Parsed { expr: Expr::Dated(Dated::new(Shape::Month(m), None)), end: k, loose })
    }

    /// Whether the month name at `j` is one, and if so whether only loosely (a range's end).
    pub(super) fn cue_ok(&self, j: usize, m: u8, cue: Option<Cue>) -> Option<bool> {
        let also_a_word = words::month_is_also_a_word(self.w.at(j));
        debug_assert!(words::month(self.w.at(j)).is_some_and(|(n, _)| n == m));
        match cue.unwrap_or_else(|| self.cue_of(j)) {
            Cue::Strong => Some(false),
            Cue::Weak if !also_a_word || self.w.capitalised(j) => Some(false),
            Cue::Loose => Some(true),
            Cue::Weak | Cue::Absent => None,
        }
    }

    /// What the words before `j` say of a month or season name there.
    pub(super) fn cue_of(&self, j: usize) -> Cue {
        let (prev, p) = self.w.cue_before(j);
        let of_a_part = prev == "of" && p > 0 && self.w.any(p - 1, PART_NOUNS);
        if STRONG_CUES.contains(&prev) || of_a_part {
            Cue::Strong
        } else if WEAK_CUES.contains(&prev) {
            Cue::Weak
        } else {
            Cue::Absent
        }
    }

    /// A month name or abbreviation ("Sept.", "Jan"): its number, the token
    /// after it and whether it is the full name. Abbreviations are left to
    /// the callers that want a day or a year next to them.
    fn month_name(&self, j: usize) -> Option<(u8, usize, bool)> {
        let (m, full) = words::month(self.w.at(j))?;
        if self.w.kind(j) != Some(Kind::Word) {
            return None;
        }
        let end = if !full && self.w.is(j + 1, ".") && self.w.glued(j + 1) { j + 2 } else { j + 1 };
        Some((m, end, full))
    }

    /// "summer 2023", "the summer of 2023", "in the fall", "last summer" (via
    /// `this_last_next`), "early spring".
    pub(super) fn season(&self, j: usize, cue: Option<Cue>) -> Option<Parsed> {
        let s = words::season(self.w.at(j))?;
        let at = if self.w.is(j + 1, "of") { j + 2 } else { j + 1 };
        if let Some((y, end)) = self.year_num(at, true) {
            return Parsed::new(Expr::Dated(Dated::new(Shape::Season(s), Some(y))), end);
        }
        let loose = match cue.unwrap_or_else(|| self.cue_of(j)) {
            Cue::Strong | Cue::Weak => false,
            Cue::Loose => true,
            Cue::Absent => return None,
        };
        Some(Parsed { expr: Expr::Dated(Dated::new(Shape::Season(s), None)), end: j + 1, loose })
    }

    /// "Q1 2024", "Q3 of 2023", "Q2" (the latest), "H1 2023". Without a year,
    /// "Q3" needs its capital or a cue ("in q3"; "answer q1" is no quarter)
    /// and "H1" is not read ("the h1 tag").
    pub(super) fn quarter(&self, j: usize) -> Option<Parsed> {
        let w = self.w;
        let (n, 1) = w.num(j + 1)? else { return None };
        let part = match w.at(j) {
            "q" if (1..=4).contains(&n) => Part::Quarter(n as u8),
            "h" if (1..=2).contains(&n) => Part::Half(n as u8),
            _ => return None,
        };
        if !w.glued(j + 1) || !self.left_clean(j) {
            return None;
        }
        let at = if w.any(j + 2, &[",", "of"]) { j + 3 } else { j + 2 };
        let (year, end) = match self.year_num(at, true) {
            Some((y, e)) => (Some(y), e),
            None if matches!(part, Part::Quarter(_))
                && (w.capitalised(j) || self.cue_of(j) == Cue::Strong)
                && self.right_clean(j + 2) =>
            {
                (None, j + 2)
            }
            None => return None,
        };
        Parsed::new(Expr::Dated(Dated { part: Some(part), ..Dated::new(Shape::Year, year) }), end)
    }

    /// "2023", "in 1850", "the year 2019".
    pub(super) fn year(&self, j: usize) -> Option<Parsed> {
        let (at, cued) =
            if self.w.is(j, "year") { (j + 1, true) } else { (j, self.w.any(j.wrapping_sub(1), YEAR_CUES)) };
        let (y, end) = self.year_num(at, cued)?;
        Parsed::new(Expr::Dated(Dated::new(Shape::Year, Some(y))), end)
    }

    /// "the 1990s", "2010s", "the 1990's".
    pub(super) fn decade(&self, j: usize, the: bool) -> Option<Parsed> {
        let w = self.w;
        let (y, 4) = w.num(j)? else { return None };
        if y % 10 != 0 || !(1000..=2990).contains(&y) || !self.left_clean(j) {
            return None;
        }
        let end = if w.is(j + 1, "s") && w.glued(j + 1) {
            j + 2
        } else if the && w.is(j + 1, "'") && w.is(j + 2, "s") && w.glued(j + 1) && w.glued(j + 2) {
            j + 3
        } else {
            return None;
        };
        Parsed::fixed(cal::months(y as i32, 1, 120), end)
    }

    // ---- numbers ---------------------------------------------------------

    /// A day of the month: "7", "7th" (not "7pm", "7 people", "7.5").
    fn day_num(&self, j: usize) -> Option<(u8, usize)> {
        let w = self.w;
        let (d, digits) = w.num(j)?;
        if digits > 2 || !(1..=31).contains(&d) || !self.left_clean(j) {
            return None;
        }
        if w.glued(j + 1) && w.kind(j + 1) == Some(Kind::Word) && words::ordinal_suffix(w.at(j + 1)) {
            return Some((d as u8, j + 2));
        }
        self.right_clean(j + 1).then_some((d as u8, j + 1))
    }

    /// A bare day at one end of a range ("3" in "3-10 May"), with an optional year after it.
    pub(super) fn day_num_alone(&self, j: usize) -> Option<Parsed> {
        let i = if self.w.is(j, "the") { j + 1 } else { j };
        let (day, k) = self.day_num(i)?;
        let at = if self.w.is(k, ",") { k + 1 } else { k };
        let (year, end) = match self.year_num(at, true) {
            Some((y, e)) => (Some(y), e),
            None => (None, k),
        };
        Some(Parsed { expr: Expr::DayNum { day, year }, end, loose: true })
    }

    /// A 4-digit year standing alone: 1900-2100, or 1000-2999 after a cue
    /// (`cued`: "in 1850", "May 1850"); not money, not part of a longer
    /// number, not a count ("2023 photos").
    fn year_num(&self, j: usize, cued: bool) -> Option<(i32, usize)> {
        let w = self.w;
        let (y, 4) = w.num(j)? else { return None };
        let range = if cued { 1000..=2999 } else { 1900..=2100 };
        if !range.contains(&y) || !self.right_clean(j + 1) {
            return None;
        }
        // The right end of "2019-2021" is a year; the end of "555-2023" is not.
        let after_number = j >= 2 && w.any(j - 1, &["-", "–"]) && w.glued(j) && w.glued(j - 1);
        let clean = match after_number.then(|| w.num(j - 2)).flatten() {
            Some((_, digits)) => digits == 4,
            None => self.left_clean(j),
        };
        if !clean {
            return None;
        }
        if j > 0 && (words::numeric_mark(w.at(j - 1)) || words::numbered(w.at(j - 1))) {
            return None;
        }
        Some((y as i32, j + 1))
    }

    /// Nothing glued on the left of token `j` but a bracket, a quote or a
    /// dash ("mid-2022", "(2023)"), and nothing that makes it money.
    pub(super) fn left_clean(&self, j: usize) -> bool {
        let w = self.w;
        if j == 0 || !w.glued(j) {
            return j == 0 || !words::numeric_mark(w.at(j - 1));
        }
        matches!(w.at(j - 1), "(" | "[" | "{" | "\"" | "'" | "“" | "‘" | "«" | "~" | "-" | "–" | "—")
    }

    /// Nothing after the number ending before token `k` that makes it a
    /// measure, money, a time of day or part of a longer number.
    pub(super) fn right_clean(&self, k: usize) -> bool {
        let w = self.w;
        let Some(kind) = w.kind(k) else { return true };
        if !w.glued(k) {
            return !(words::numeric_mark(w.at(k)) || kind == Kind::Word && words::counted(w.at(k)));
        }
        match w.at(k) {
            "," | "." | ":" | "/" => !(w.glued(k + 1) && w.kind(k + 1) == Some(Kind::Num)),
            "'" | "’" => true, // "2023's"
            ")" | "]" | "}" | "\"" | "”" | "»" | "?" | "!" | ";" | "-" | "–" | "—" | "…" => true,
            _ => false,
        }
    }
}
