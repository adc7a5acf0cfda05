//! Expressions relative to now: "yesterday", "last week", "3 days ago",
//! "the past 2 weeks", "last Friday", "this weekend".

use super::calendar::{self as cal, Interval};
use super::patterns::{Cue, Dated, Expr, Parsed, Reader, Rel, Shape, DAY_PARTS};
use super::words::{self, Unit};

impl Reader<'_, '_> {
    /// "today", "tonight", "yesterday (evening)", "tomorrow", "the day before
    /// yesterday", "last night", "this morning", "earlier today". A night runs
    /// from noon to noon, so it holds the evening and the small hours.
    pub(super) fn named_day(&self, j: usize) -> Option<Parsed> {
        let w = self.w;
        let today = self.now.today();
        let day = |off: i64, end: usize| Parsed::fixed(cal::day(cal::add_days(today, off)?), end);
        let night = |off: i64, end: usize| {
            let noon = |d| cal::ms_at(cal::add_days(today, d)?.at(12, 0, 0, 0));
            Parsed::fixed(Interval::new(noon(off)?, noon(off + 1)?), end)
        };
        let sided = |off: i64| {
            if w.any(j + 1, DAY_PARTS) {
                day(off, j + 2)
            } else if w.is(j + 1, "night") {
                night(off, j + 2)
            } else {
                day(off, j + 1)
            }
        };
        match w.at(j) {
            "today" => day(0, j + 1),
            "tonight" => night(0, j + 1),
            "yesterday" => sided(-1),
            "tomorrow" => sided(1),
            "this" if w.any(j + 1, DAY_PARTS) => day(0, j + 2),
            "this" if w.is(j + 1, "night") => night(0, j + 2),
            "last" if w.is(j + 1, "night") => night(-1, j + 2),
            "earlier" | "later" if w.is(j + 1, "today") => {
                let (start, end) = (cal::ms_of(today)?, cal::ms_of(cal::add_days(today, 1)?)?);
                let iv = if w.is(j, "earlier") {
                    Interval::new(start, self.now.ms)
                } else {
                    Interval::new(self.now.ms, end)
                };
                Parsed::fixed(iv, j + 2)
            }
            _ => {
                if let Some(k) = w.seq(j, &["day", "before", "yesterday"]) {
                    day(-2, k)
                } else if let Some(k) = w.seq(j, &["day", "after", "tomorrow"]) {
                    day(2, k)
                } else {
                    None
                }
            }
        }
    }

    /// "this/last/next week|weekend|month|quarter|year", "this past week",
    /// "last May", "this summer", "next Friday". (After "the", "last week" is
    /// the past seven days: `past_n`.)
    pub(super) fn this_last_next(&self, j: usize) -> Option<Parsed> {
        let w = self.w;
        let (step, rel, k) = if let Some(k) = w.seq(j, &["this", "past"]) {
            (-1, Rel::Last, k)
        } else {
            match w.at(j) {
                "this" => (0, Rel::This, j + 1),
                "last" | "previous" => (-1, Rel::Last, j + 1),
                "next" => (1, Rel::Next, j + 1),
                _ => return None,
            }
        };
        let now = self.now;
        let dated = |shape| Parsed::new(Expr::Dated(Dated { rel, ..Dated::new(shape, None) }), k + 1);
        match w.at(k) {
            "week" => Parsed::fixed(cal::unit_this(now, Unit::Week, step), k + 1),
            "month" => Parsed::fixed(cal::unit_this(now, Unit::Month, step), k + 1),
            "year" => Parsed::fixed(cal::unit_this(now, Unit::Year, step), k + 1),
            "quarter" => {
                let first = (i32::from(now.today().month()) - 1) / 3 * 3 + 1;
                Parsed::fixed(cal::months(now.year(), first + 3 * step as i32, 3), k + 1)
            }
            "weekend" => {
                let monday =
                    cal::add_days(now.today(), 7 * step - i64::from(now.today().weekday().to_monday_zero_offset()))?;
                Parsed::fixed(cal::days(cal::add_days(monday, 5)?, cal::add_days(monday, 6)?), k + 1)
            }
            word => {
                if let Some(s) = words::season(word) {
                    return dated(Shape::Season(s));
                }
                if let Some(d) = words::weekday(word) {
                    return Parsed::fixed(self.weekday_at(d, rel), self.day_part_after(k + 1));
                }
                let (m, true) = words::month(word)? else { return None };
                self.cue_ok(k, m, Some(Cue::Weak))?;
                dated(Shape::Month(m))
            }
        }
    }

    /// A trailing "morning", "afternoon", "evening" or "night" belongs to the day before it.
    fn day_part_after(&self, k: usize) -> usize {
        if self.w.any(k, DAY_PARTS) || self.w.is(k, "night") {
            k + 1
        } else {
            k
        }
    }

    /// Weekday `d` (Monday = 0): `Plain` the latest at or before today, `Last`
    /// the latest before today, `This` the one of this week, `Next` the first after today.
    fn weekday_at(&self, d: i8, rel: Rel) -> Option<Interval> {
        let today = self.now.today();
        let t = today.weekday().to_monday_zero_offset();
        let off = match rel {
            Rel::Plain => -i64::from((t - d).rem_euclid(7)),
            Rel::Last => -i64::from((t - d - 1).rem_euclid(7) + 1),
            Rel::This => i64::from(d - t),
            Rel::Next => i64::from((d - t - 1).rem_euclid(7) + 1),
        };
        cal::day(cal::add_days(today, off)?)
    }

    /// "Friday", "on Friday": the latest Friday at or before today ("Good Friday" is not one).
    pub(super) fn weekday(&self, j: usize) -> Option<Parsed> {
        let d = words::weekday(self.w.at(j))?;
        if j > 0 && words::holiday_before_weekday(self.w.at(j - 1)) {
            return None;
        }
        Parsed::fixed(self.weekday_at(d, Rel::Plain), self.day_part_after(j + 1))
    }

    /// "the week before last", "the month before last", "the year before last".
    pub(super) fn before_last(&self, j: usize) -> Option<Parsed> {
        let unit = match self.w.at(j) {
            "week" => Unit::Week,
            "month" => Unit::Month,
            "year" => Unit::Year,
            _ => return None,
        };
        let end = self.w.seq(j + 1, &["before", "last"])?;
        Parsed::fixed(cal::unit_this(self.now, unit, -2), end)
    }

    /// "(on/over) the weekend": the latest Saturday-Sunday starting at or before now.
    pub(super) fn the_weekend(&self, j: usize) -> Option<Parsed> {
        if !self.w.is(j, "weekend") {
            return None;
        }
        let today = self.now.today();
        let back = (i64::from(today.weekday().to_monday_zero_offset()) - 5).rem_euclid(7);
        let saturday = cal::add_days(today, -back)?;
        Parsed::fixed(cal::days(saturday, cal::add_days(saturday, 1)?), j + 1)
    }

    /// "3 days ago", "a week ago", "two months ago", "a couple of years ago",
    /// "several weeks ago": that day, Monday-Sunday week, calendar month or year.
    pub(super) fn ago(&self, j: usize) -> Option<Parsed> {
        let (count, k) = self.count(j)?;
        let unit = words::unit(self.w.at(k))?;
        if !self.w.is(k + 1, "ago") {
            return None;
        }
        let iv = match count {
            Count::Exact(n) => cal::unit_ago(self.now, unit, n),
            Count::Several => Some(cal::unit_ago(self.now, unit, 5)?.hull(cal::unit_ago(self.now, unit, 2)?)),
        };
        Parsed::fixed(iv, k + 2)
    }

    /// "the past 3 days", "in the last two weeks", "the past few months", "the
    /// past year", "past week": [now - N units, now); "the next 3 days", "the
    /// coming week": [now, now + N units).
    pub(super) fn past_n(&self, j: usize, the: bool) -> Option<Parsed> {
        let w = self.w;
        let ahead = match w.at(j) {
            "past" | "last" | "previous" | "preceding" => false,
            "next" | "coming" => true,
            _ => return None,
        };
        let (n, k) = match self.count(j + 1) {
            Some((Count::Exact(n), k)) => (n, k),
            Some((Count::Several, k)) => (5, k),
            None if the || w.any(j, &["past", "coming"]) => (1, j + 1),
            None => return None,
        };
        let unit = words::unit(w.at(k))?;
        if k == j + 1 && w.at(k).ends_with('s') {
            return None; // "the last days of": no count, no span
        }
        Parsed::fixed(cal::window(self.now, unit, if ahead { -n } else { n }), k + 1)
    }

    /// "earlier this year" = [start of the year, now); "later this month" = [now, its end).
    pub(super) fn earlier_this(&self, j: usize) -> Option<Parsed> {
        let w = self.w;
        let earlier = match w.at(j) {
            "earlier" => true,
            "later" => false,
            _ => return None,
        };
        let k = w.seq(j + 1, &["this"])?;
        let unit = match w.at(k) {
            "week" => Unit::Week,
            "month" => Unit::Month,
            "year" => Unit::Year,
            _ => return None,
        };
        let whole = cal::unit_this(self.now, unit, 0)?;
        let iv = if earlier { Interval::new(whole.from, self.now.ms) } else { Interval::new(self.now.ms, whole.until) };
        Parsed::fixed(iv, k + 1)
    }

    /// A count of units: digits, "one" .. "twenty", "a", "an", "a couple (of)" = 2,
    /// "a few" = 3, "several" (2 to 5, by the caller).
    fn count(&self, j: usize) -> Option<(Count, usize)> {
        let w = self.w;
        for (seq, n) in [
            (&["a", "couple", "of"][..], 2),
            (&["a", "couple"], 2),
            (&["couple", "of"], 2),
            (&["a", "few"], 3),
            (&["few"], 3),
        ] {
            if let Some(k) = w.seq(j, seq) {
                return Some((Count::Exact(n), k));
            }
        }
        if w.is(j, "several") {
            return Some((Count::Several, j + 1));
        }
        if let Some(n) = words::number_word(w.at(j)) {
            return Some((Count::Exact(i64::from(n)), j + 1));
        }
        let (n, digits) = w.num(j)?;
        (digits <= 5 && self.left_clean(j)).then_some((Count::Exact(i64::from(n)), j + 1))
    }
}

#[derive(Debug, Clone, Copy)]
enum Count {
    Exact(i64),
    /// 2 to 5 units.
    Several,
}
