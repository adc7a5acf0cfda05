//! Calendar arithmetic over UTC civil dates (jiff), in the unix milliseconds
//! the engine's valid time is kept in. Every step is checked: a date jiff
//! cannot hold (beyond the years -9999..=9999) is `None`, never a panic.

use jiff::civil::{Date, DateTime};
use jiff::tz::Offset;
use jiff::{Span, Timestamp};

use super::words::{Season, Unit};

/// The open start of an interval with no lower bound ("before 2020"). Not
/// `i64::MIN` (nor 0, which is 1970 and would cut off historical facts):
/// a quarter of the range leaves room for arithmetic on it without overflow.
pub const OPEN_START: i64 = i64::MIN / 4;
/// The open end of an interval with no upper bound ("after June 2023").
pub const OPEN_END: i64 = i64::MAX / 4;

/// [from, until), unix ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Interval {
    pub from: i64,
    pub until: i64,
}

impl Interval {
    pub fn new(from: i64, until: i64) -> Option<Interval> {
        (from < until).then_some(Interval { from, until })
    }

    pub fn hull(self, other: Interval) -> Interval {
        Interval { from: self.from.min(other.from), until: self.until.max(other.until) }
    }

    pub fn contains(self, ms: i64) -> bool {
        self.from <= ms && ms < self.until
    }
}

/// The reference time ("now") as unix ms and as a UTC civil date-time.
pub(super) struct Clock {
    pub ms: i64,
    pub now: DateTime,
}

impl Clock {
    pub fn new(ms: i64) -> Option<Clock> {
        Some(Clock { ms, now: civil(ms)? })
    }

    pub fn today(&self) -> Date {
        self.now.date()
    }

    pub fn year(&self) -> i32 {
        i32::from(self.now.year())
    }
}

pub(super) fn civil(ms: i64) -> Option<DateTime> {
    Some(Offset::UTC.to_datetime(Timestamp::from_millisecond(ms).ok()?))
}

pub(super) fn ms_at(dt: DateTime) -> Option<i64> {
    Some(Offset::UTC.to_timestamp(dt).ok()?.as_millisecond())
}

/// Midnight (UTC) starting `d`.
pub(super) fn ms_of(d: Date) -> Option<i64> {
    ms_at(d.at(0, 0, 0, 0))
}

pub(super) fn date(year: i32, month: u8, day: u8) -> Option<Date> {
    Date::new(i16::try_from(year).ok()?, i8::try_from(month).ok()?, i8::try_from(day).ok()?).ok()
}

pub(super) fn add_days(d: Date, n: i64) -> Option<Date> {
    d.checked_add(Span::new().try_days(n).ok()?).ok()
}

/// The days `first` through `last`, both included.
pub(super) fn days(first: Date, last: Date) -> Option<Interval> {
    Interval::new(ms_of(first)?, ms_of(add_days(last, 1)?)?)
}

pub(super) fn day(d: Date) -> Option<Interval> {
    days(d, d)
}

/// `count` whole months from the first of `month` of `year` (month may run past 12).
pub(super) fn months(year: i32, month: i32, count: i32) -> Option<Interval> {
    let first = date(year, 1, 1)?.checked_add(Span::new().try_months(month - 1).ok()?).ok()?;
    let after = first.checked_add(Span::new().try_months(count).ok()?).ok()?;
    Interval::new(ms_of(first)?, ms_of(after)?)
}

pub(super) fn year(year: i32) -> Option<Interval> {
    months(year, 1, 12)
}

/// The Monday-to-Sunday week holding `d`.
pub(super) fn week_of(d: Date) -> Option<Interval> {
    let monday = add_days(d, -i64::from(d.weekday().to_monday_zero_offset()))?;
    days(monday, add_days(monday, 6)?)
}

/// Meteorological seasons of the northern hemisphere; winter `y` runs from
/// December `y` through February `y + 1`.
pub(super) fn season(y: i32, s: Season) -> Option<Interval> {
    let first = match s {
        Season::Spring => 3,
        Season::Summer => 6,
        Season::Autumn => 9,
        Season::Winter => 12,
    };
    months(y, first, 3)
}

/// The calendar unit (that minute, hour, day, week, month or year) `n` units before now.
pub(super) fn unit_ago(now: &Clock, unit: Unit, n: i64) -> Option<Interval> {
    let today = now.today();
    match unit {
        Unit::Minute | Unit::Hour => {
            let size: i64 = if unit == Unit::Minute { 60_000 } else { 3_600_000 };
            let at = now.ms.checked_sub(n.checked_mul(size)?)?;
            let start = at.div_euclid(size).checked_mul(size)?;
            civil(start)?;
            Interval::new(start, start.checked_add(size)?)
        }
        Unit::Day => day(add_days(today, -n)?),
        Unit::Week => week_of(add_days(today, n.checked_mul(-7)?)?),
        Unit::Month => {
            let back = i32::try_from(n).ok()?;
            months(now.year(), i32::from(today.month()).checked_sub(back)?, 1)
        }
        Unit::Year => year(now.year().checked_sub(i32::try_from(n).ok()?)?),
    }
}

/// The calendar unit holding now, moved by `step` units (-1 last, 0 this, 1 next).
pub(super) fn unit_this(now: &Clock, unit: Unit, step: i64) -> Option<Interval> {
    unit_ago(now, unit, step.checked_neg()?)
}

/// [now - n units, now), or for a negative `n` [now, now + |n| units).
pub(super) fn window(now: &Clock, unit: Unit, n: i64) -> Option<Interval> {
    let span = match unit {
        Unit::Minute => Span::new().try_minutes(n),
        Unit::Hour => Span::new().try_hours(n),
        Unit::Day => Span::new().try_days(n),
        Unit::Week => Span::new().try_weeks(n),
        Unit::Month => Span::new().try_months(n),
        Unit::Year => Span::new().try_years(n),
    }
    .ok()?;
    let other = ms_at(now.now.checked_sub(span).ok()?)?;
    Interval::new(other.min(now.ms), other.max(now.ms))
}

/// A part of a period: what "early", "the end of", "the first week of",
/// "the second half of" or "Q3" cut out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Early,
    Mid,
    Late,
    End,
    /// 1 or 2.
    Half(u8),
    /// 1 ..= 4.
    Quarter(u8),
    /// 1 ..= 4, or 5 for the last seven days.
    Week(u8),
}

/// `part` of `whole`, which must be whole calendar months: of one month, the
/// parts are days (early 1-10, mid 11-20, late 21-end, end = the last 10
/// days, halves 1-15 and 16-end, weeks 1-7 .. 22-28 and the last 7 days);
/// of a span of 3k months (a year, a season, a quarter), thirds and halves
/// of its months, and quarters of a year. Anything else has no such part.
pub(super) fn part_of(part: Part, whole: Interval) -> Option<Interval> {
    let first = civil(whole.from)?;
    let after = civil(whole.until)?;
    let midnight = |dt: DateTime| dt.hour() == 0 && dt.minute() == 0 && dt.second() == 0 && dt.subsec_nanosecond() == 0;
    if first.day() != 1 || after.day() != 1 || !midnight(first) || !midnight(after) {
        return None;
    }
    let (y, m) = (i32::from(first.year()), i32::from(first.month()));
    let n = (i32::from(after.year()) - y) * 12 + i32::from(after.month()) - m;
    if n == 1 {
        let d = first.date();
        let dim = d.days_in_month() as u8;
        let (a, b) = match part {
            Part::Early => (1, 10),
            Part::Mid => (11, 20),
            Part::Late => (21, dim),
            Part::End => (dim - 9, dim),
            Part::Half(1) => (1, 15),
            Part::Half(_) => (16, dim),
            Part::Week(k @ 1..=4) => (7 * k - 6, 7 * k),
            Part::Week(_) => (dim - 6, dim),
            Part::Quarter(_) => return None,
        };
        return days(date(y, m as u8, a)?, date(y, m as u8, b)?);
    }
    if n <= 0 || n % 3 != 0 {
        return None;
    }
    let third = n / 3;
    match part {
        Part::Early => months(y, m, third),
        Part::Mid => months(y, m + third, third),
        Part::Late | Part::End => months(y, m + 2 * third, third),
        Part::Half(h) if n % 2 == 0 => months(y, m + (i32::from(h) - 1) * n / 2, n / 2),
        Part::Quarter(q) if n == 12 => months(y, m + (i32::from(q) - 1) * 3, 3),
        _ => None,
    }
}
