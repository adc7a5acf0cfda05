use super::*;
use jiff::civil::DateTime;
use proptest::prelude::*;

/// Monday 7 December 2026, noon.
const DEC: &str = "2026-12-07T12:00";
/// Friday 15 May 2026, noon: a reference inside May, on a Friday.
const MAY: &str = "2026-05-15T12:00";

/// "2024-05-07" or "2024-05-07T12:00" (UTC) as unix ms; "-inf" and "+inf"
/// are the open ends.
fn ms(s: &str) -> i64 {
    match s {
        "-inf" => OPEN_START,
        "+inf" => OPEN_END,
        _ => {
            let full = if s.contains('T') { s.to_string() } else { format!("{s}T00:00") };
            let dt: DateTime = full.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            calendar::ms_at(dt).unwrap()
        }
    }
}

fn show(v: i64) -> String {
    match v {
        OPEN_START => "-inf".into(),
        OPEN_END => "+inf".into(),
        _ => calendar::civil(v).map_or_else(|| v.to_string(), |d| d.to_string()),
    }
}

/// Each row: question, reference, expected [from, until) ("now" is the reference).
fn check(rows: &[(&str, &str, &str, &str)]) {
    let mut failed = Vec::new();
    for &(q, reference, from, until) in rows {
        let now = ms(reference);
        let at = |s: &str| if s == "now" { now } else { ms(s) };
        let got = ground(q, now).map(|w| (w.from, w.until));
        if got != Some((at(from), at(until))) {
            let got = got.map_or("None".to_string(), |(a, b)| format!("{} .. {}", show(a), show(b)));
            failed.push(format!("{q:?} @ {reference}: want {from} .. {until}, got {got}"));
        }
    }
    assert!(failed.is_empty(), "{} of {} wrong:\n{}", failed.len(), rows.len(), failed.join("\n"));
}

fn check_none(questions: &[&str]) {
    let wrong: Vec<String> = questions
        .iter()
        .filter_map(|q| {
            ground(q, ms(DEC)).map(|w| format!("{q:?} grounded {:?} ({} .. {})", w.text, show(w.from), show(w.until)))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn absolute_dates() {
    check(&[
        ("What did Dana do on 7 May 2023?", DEC, "2023-05-07", "2023-05-08"),
        ("What happened May 7, 2023?", DEC, "2023-05-07", "2023-05-08"),
        ("what happened may 7th 2023", DEC, "2023-05-07", "2023-05-08"),
        ("Meeting notes from 2023-05-07", DEC, "2023-05-07", "2023-05-08"),
        ("What was logged at 2023-05-07T10:15:00Z?", DEC, "2023-05-07", "2023-05-08"),
        ("Who called on the 7th of May 2023?", DEC, "2023-05-07", "2023-05-08"),
        ("What did we sign on Sept. 3, 2021?", DEC, "2021-09-03", "2021-09-04"),
        ("Anything on Fri, 3 May 2024?", DEC, "2024-05-03", "2024-05-04"),
        ("Dec 31st, 1999", DEC, "1999-12-31", "2000-01-01"),
        // Without a year: the latest such day at or before the reference date.
        ("What did we do on May 7?", DEC, "2026-05-07", "2026-05-08"),
        ("What did we do on the 7th of May?", MAY, "2026-05-07", "2026-05-08"),
        ("What did we do on May 15?", MAY, "2026-05-15", "2026-05-16"),
        ("What did we do on May 20?", MAY, "2025-05-20", "2025-05-21"),
        ("What happened on 20 December?", DEC, "2025-12-20", "2025-12-21"),
        ("Anything on Feb 29?", DEC, "2024-02-29", "2024-03-01"),
    ]);
}

#[test]
fn months() {
    check(&[
        ("What did Dana do in May 2024?", DEC, "2024-05-01", "2024-06-01"),
        ("What did Dana do in May?", DEC, "2026-05-01", "2026-06-01"),
        ("What did Dana do in May?", MAY, "2026-05-01", "2026-06-01"),
        ("What did Dana do during June?", MAY, "2025-06-01", "2025-07-01"),
        ("What did Dana do in december", DEC, "2026-12-01", "2027-01-01"),
        ("where did we go in march", DEC, "2026-03-01", "2026-04-01"),
        ("What did Dana do last May?", DEC, "2026-05-01", "2026-06-01"),
        ("What did Dana do last May?", MAY, "2025-05-01", "2025-06-01"),
        ("What did Dana do this May?", MAY, "2026-05-01", "2026-06-01"),
        ("What will Dana do next May?", DEC, "2027-05-01", "2027-06-01"),
        ("What is due this june?", DEC, "2026-06-01", "2026-07-01"),
        ("What happened in the month of August?", DEC, "2026-08-01", "2026-09-01"),
        ("Jan 2020 trips", DEC, "2020-01-01", "2020-02-01"),
        ("Sept. 2021", DEC, "2021-09-01", "2021-10-01"),
        ("May of 2019", DEC, "2019-05-01", "2019-06-01"),
        ("They march in August.", DEC, "2026-08-01", "2026-09-01"),
        ("WHAT HAPPENED IN MAY 2024", DEC, "2024-05-01", "2024-06-01"),
    ]);
}

#[test]
fn month_names_that_are_words() {
    check_none(&[
        "May I ask what Sam likes?",
        "Sam may go to Paris.",
        "Will you march with us?",
        "This may be wrong.",
        "Leaving early may help.",
        "They said it may rain, next may be better",
        "an august institution",
        "Did you talk to June?",
        "A photo of April",
        "Jan asked about the budget",
        "Can Dana march 5 miles?",
        "May 5 people join?",
        "May 2 of us come?",
        "Dec 5 people",
    ]);
}

#[test]
fn years() {
    check(&[
        ("What happened in 2023?", DEC, "2023-01-01", "2024-01-01"),
        ("2023", DEC, "2023-01-01", "2024-01-01"),
        ("Dana's 2023 goals", DEC, "2023-01-01", "2024-01-01"),
        ("What did we do in the year 2019?", DEC, "2019-01-01", "2020-01-01"),
        ("Who ruled in 1850?", DEC, "1850-01-01", "1851-01-01"),
        ("(2021)", DEC, "2021-01-01", "2022-01-01"),
        ("What music did Dana like in the 1990s?", DEC, "1990-01-01", "2000-01-01"),
    ]);
    // A number with a unit, money, a count or part of a longer number is no year;
    // "2023 photos" is read as a count (a year before a plural noun is too rare in questions).
    check_none(&[
        "I have 2023 photos",
        "How many of the 2000 people came?",
        "It cost $2023",
        "It cost 2023 dollars",
        "She ran 2023km",
        "about 2,023 people",
        "Call 555-2023",
        "version 1.2023",
        "more than 2000",
        "ticket #2023",
        "It grew 2023%",
        "Who ruled 1850?",
        "room 3100",
        "What is on page 2023?",
        "Who was in room 2010?",
    ]);
}

#[test]
fn parts() {
    check(&[
        ("early 2023", DEC, "2023-01-01", "2023-05-01"),
        ("in mid-2022", DEC, "2022-05-01", "2022-09-01"),
        ("mid 2022", DEC, "2022-05-01", "2022-09-01"),
        ("late 2021", DEC, "2021-09-01", "2022-01-01"),
        ("early May 2024", DEC, "2024-05-01", "2024-05-11"),
        ("mid-May 2024", DEC, "2024-05-11", "2024-05-21"),
        ("late May 2024", DEC, "2024-05-21", "2024-06-01"),
        ("What did Dana do in early may?", DEC, "2026-05-01", "2026-05-11"),
        ("at the beginning of May 2024", DEC, "2024-05-01", "2024-05-11"),
        ("the start of May", DEC, "2026-05-01", "2026-05-11"),
        ("by the end of May 2024?", DEC, "-inf", "2024-06-01"),
        ("at the end of May 2024", DEC, "2024-05-22", "2024-06-01"),
        ("the end of February 2024", DEC, "2024-02-20", "2024-03-01"),
        ("the first week of March 2024", DEC, "2024-03-01", "2024-03-08"),
        ("the second week of March 2024", DEC, "2024-03-08", "2024-03-15"),
        ("the 3rd week of March 2024", DEC, "2024-03-15", "2024-03-22"),
        ("the fourth week of March 2024", DEC, "2024-03-22", "2024-03-29"),
        ("the last week of March 2024", DEC, "2024-03-25", "2024-04-01"),
        ("the last week of march", DEC, "2026-03-25", "2026-04-01"),
        ("first half of 2023", DEC, "2023-01-01", "2023-07-01"),
        ("the second half of 2023", DEC, "2023-07-01", "2024-01-01"),
        ("Q1 2024", DEC, "2024-01-01", "2024-04-01"),
        ("in Q3 of 2023", DEC, "2023-07-01", "2023-10-01"),
        ("the third quarter of 2024", DEC, "2024-07-01", "2024-10-01"),
        ("the last quarter of 2024", DEC, "2024-10-01", "2025-01-01"),
        ("H2 2023", DEC, "2023-07-01", "2024-01-01"),
        ("what closed in Q3?", DEC, "2026-07-01", "2026-10-01"),
        ("what closed in q3", DEC, "2026-07-01", "2026-10-01"),
        ("what closed in Q4?", MAY, "2025-10-01", "2026-01-01"),
        ("early last year", DEC, "2025-01-01", "2025-05-01"),
        ("the end of last month", DEC, "2026-11-21", "2026-12-01"),
        ("the first week of last month", DEC, "2026-11-01", "2026-11-08"),
        ("late summer 2023", DEC, "2023-08-01", "2023-09-01"),
        // Late May asked on 15 May: this year's has not begun, so last year's.
        ("late May", MAY, "2025-05-21", "2025-06-01"),
    ]);
}

#[test]
fn seasons() {
    check(&[
        ("summer 2023", DEC, "2023-06-01", "2023-09-01"),
        ("in the summer of 2023", DEC, "2023-06-01", "2023-09-01"),
        ("winter 2023", DEC, "2023-12-01", "2024-03-01"),
        ("autumn 2022", DEC, "2022-09-01", "2022-12-01"),
        ("What did we do last summer?", DEC, "2026-06-01", "2026-09-01"),
        ("What did we do last summer?", MAY, "2025-06-01", "2025-09-01"),
        ("this spring", DEC, "2026-03-01", "2026-06-01"),
        ("this spring", MAY, "2026-03-01", "2026-06-01"),
        ("in the fall", DEC, "2026-09-01", "2026-12-01"),
        ("in the fall", MAY, "2025-09-01", "2025-12-01"),
        ("during winter", MAY, "2025-12-01", "2026-03-01"),
        ("last winter", DEC, "2025-12-01", "2026-03-01"),
        ("this winter", DEC, "2026-12-01", "2027-03-01"),
        ("next summer", DEC, "2027-06-01", "2027-09-01"),
    ]);
    check_none(&["Did Dana fall?", "the hot spring water", "a summer dress", "Does Dana like summer?"]);
    check_none(&["What is the answer to q1?", "What's in the h1 tag?", "Did Dana mention the fall of Rome?"]);
}

#[test]
fn ranges() {
    check(&[
        ("from March to May 2024", DEC, "2024-03-01", "2024-06-01"),
        ("between 2019 and 2021", DEC, "2019-01-01", "2022-01-01"),
        ("What did we do March-May 2024?", DEC, "2024-03-01", "2024-06-01"),
        ("in March–May 2024", DEC, "2024-03-01", "2024-06-01"),
        ("from 3 May to 10 June 2023", DEC, "2023-05-03", "2023-06-11"),
        ("3-10 May 2023", DEC, "2023-05-03", "2023-05-11"),
        ("May 3-10, 2023", DEC, "2023-05-03", "2023-05-11"),
        ("between the 3rd and the 10th of May 2023", DEC, "2023-05-03", "2023-05-11"),
        ("2019-2021", DEC, "2019-01-01", "2022-01-01"),
        ("2019-21", DEC, "2019-01-01", "2022-01-01"),
        ("from November to February 2024", DEC, "2023-11-01", "2024-03-01"),
        ("from March to May", DEC, "2026-03-01", "2026-06-01"),
        ("from March to May", MAY, "2026-03-01", "2026-06-01"),
        ("from June to August", MAY, "2025-06-01", "2025-09-01"),
        ("from May 2023 to June", DEC, "2023-05-01", "2023-07-01"),
        ("from yesterday to today", DEC, "2026-12-06", "2026-12-08"),
        // Lists of one kind share the year of the last.
        ("in May and June 2024", DEC, "2024-05-01", "2024-07-01"),
        ("in May or June", MAY, "2025-05-01", "2025-07-01"),
        ("on 3 and 4 May 2023", DEC, "2023-05-03", "2023-05-05"),
        ("in the spring and summer of 2023", DEC, "2023-03-01", "2023-09-01"),
        ("in May and in 2024", DEC, "2024-01-01", "2026-06-01"),
        ("since March", DEC, "2026-03-01", "now"),
        ("since 2020", DEC, "2020-01-01", "now"),
        ("ever since last summer", DEC, "2026-06-01", "now"),
        ("since next year", DEC, "2027-01-01", "2028-01-01"),
        ("until June 2023", DEC, "-inf", "2023-07-01"),
        ("till June 2023", DEC, "-inf", "2023-07-01"),
        ("up to June 2023", DEC, "-inf", "2023-07-01"),
        // "up to" after a form of "be" or "get" asks what someone did.
        ("What was Sam up to last month?", DEC, "2026-11-01", "2026-12-01"),
        ("what have you been up to in May 2024", DEC, "2024-05-01", "2024-06-01"),
        ("What did Dana get up to two months ago?", DEC, "2026-10-01", "2026-11-01"),
        ("before 2020", DEC, "-inf", "2020-01-01"),
        ("pre-2020", DEC, "-inf", "2020-01-01"),
        ("after June 2023", DEC, "2023-07-01", "+inf"),
        ("from 2020 onwards", DEC, "2020-01-01", "+inf"),
        ("2021 onwards", DEC, "2021-01-01", "+inf"),
        ("before may", DEC, "-inf", "2026-05-01"),
        ("from May 2024 to now", DEC, "2024-05-01", "2026-12-07T12:00:00.001"),
        ("from 2020 to the present", DEC, "2020-01-01", "2026-12-07T12:00:00.001"),
    ]);
}

#[test]
fn relative_days_and_weeks() {
    check(&[
        ("What did I eat today?", DEC, "2026-12-07", "2026-12-08"),
        ("What's on tonight?", DEC, "2026-12-07T12:00", "2026-12-08T12:00"),
        ("What did I eat yesterday?", DEC, "2026-12-06", "2026-12-07"),
        ("yesterday evening", DEC, "2026-12-06", "2026-12-07"),
        ("the day before yesterday", DEC, "2026-12-05", "2026-12-06"),
        ("What did we do last night?", DEC, "2026-12-06T12:00", "2026-12-07T12:00"),
        ("this morning", DEC, "2026-12-07", "2026-12-08"),
        ("tomorrow", DEC, "2026-12-08", "2026-12-09"),
        ("earlier today", DEC, "2026-12-07", "now"),
        ("this week", DEC, "2026-12-07", "2026-12-14"),
        ("last week", DEC, "2026-11-30", "2026-12-07"),
        ("Last Week", MAY, "2026-05-04", "2026-05-11"),
        ("next week", DEC, "2026-12-14", "2026-12-21"),
        ("this weekend", DEC, "2026-12-12", "2026-12-14"),
        ("last weekend", DEC, "2026-12-05", "2026-12-07"),
        ("over the weekend", DEC, "2026-12-05", "2026-12-07"),
        ("this past weekend", DEC, "2026-12-05", "2026-12-07"),
        ("What did Dana do last Friday?", DEC, "2026-12-04", "2026-12-05"),
        ("on Friday", DEC, "2026-12-04", "2026-12-05"),
        ("on Friday", MAY, "2026-05-15", "2026-05-16"),
        ("last Friday", MAY, "2026-05-08", "2026-05-09"),
        ("on monday", DEC, "2026-12-07", "2026-12-08"),
        ("last Monday", DEC, "2026-11-30", "2026-12-01"),
        ("this Friday", DEC, "2026-12-11", "2026-12-12"),
        ("next Tuesday", DEC, "2026-12-08", "2026-12-09"),
        ("Sunday night", DEC, "2026-12-06", "2026-12-07"),
    ]);
    check_none(&["Good Friday", "What did we buy on Black Friday?", "on Fridays"]);
}

#[test]
fn relative_months_and_years() {
    check(&[
        ("this month", DEC, "2026-12-01", "2027-01-01"),
        ("last month", DEC, "2026-11-01", "2026-12-01"),
        ("next month", DEC, "2027-01-01", "2027-02-01"),
        ("this year", DEC, "2026-01-01", "2027-01-01"),
        ("last year", DEC, "2025-01-01", "2026-01-01"),
        ("next year", DEC, "2027-01-01", "2028-01-01"),
        ("this quarter", DEC, "2026-10-01", "2027-01-01"),
        ("last quarter", MAY, "2026-01-01", "2026-04-01"),
        ("earlier this year", DEC, "2026-01-01", "now"),
        ("since the beginning of the year", DEC, "2026-01-01", "now"),
        ("at the end of the month", DEC, "2026-12-22", "2027-01-01"),
        ("the week before last", DEC, "2026-11-23", "2026-11-30"),
        ("the year before last", DEC, "2024-01-01", "2025-01-01"),
        ("later this month", DEC, "now", "2027-01-01"),
    ]);
}

#[test]
fn ago() {
    check(&[
        ("3 days ago", DEC, "2026-12-04", "2026-12-05"),
        ("three days ago", DEC, "2026-12-04", "2026-12-05"),
        ("a day ago", DEC, "2026-12-06", "2026-12-07"),
        ("a week ago", DEC, "2026-11-30", "2026-12-07"),
        ("2 weeks ago", DEC, "2026-11-23", "2026-11-30"),
        ("two months ago", DEC, "2026-10-01", "2026-11-01"),
        ("twelve months ago", DEC, "2025-12-01", "2026-01-01"),
        ("a year ago", DEC, "2025-01-01", "2026-01-01"),
        ("two years ago", DEC, "2024-01-01", "2025-01-01"),
        ("a couple of years ago", DEC, "2024-01-01", "2025-01-01"),
        ("a couple days ago", DEC, "2026-12-05", "2026-12-06"),
        ("a few days ago", DEC, "2026-12-04", "2026-12-05"),
        ("a few weeks ago", DEC, "2026-11-16", "2026-11-23"),
        ("several days ago", DEC, "2026-12-02", "2026-12-06"),
        ("several years ago", DEC, "2021-01-01", "2025-01-01"),
        ("an hour ago", DEC, "2026-12-07T11:00", "2026-12-07T12:00"),
        ("twenty years ago", DEC, "2006-01-01", "2007-01-01"),
    ]);
    check_none(&["years ago", "long ago", "recently", "What has Dana done lately?", "in 3 days"]);
}

#[test]
fn rolling_windows() {
    check(&[
        ("the past 3 days", DEC, "2026-12-04T12:00", "now"),
        ("in the last 2 weeks", DEC, "2026-11-23T12:00", "now"),
        ("over the past few months", DEC, "2026-09-07T12:00", "now"),
        ("in the past year", DEC, "2025-12-07T12:00", "now"),
        ("the last week", DEC, "2026-11-30T12:00", "now"),
        ("past week", DEC, "2026-11-30T12:00", "now"),
        ("within the past 24 hours", DEC, "2026-12-06T12:00", "now"),
        ("the last several days", DEC, "2026-12-02T12:00", "now"),
        ("last two weeks", DEC, "2026-11-23T12:00", "now"),
        ("the next 3 days", DEC, "now", "2026-12-10T12:00"),
        ("the coming week", DEC, "now", "2026-12-14T12:00"),
    ]);
}

#[test]
fn several_expressions_give_their_hull() {
    check(&[
        ("in 2019 and in 2021", DEC, "2019-01-01", "2022-01-01"),
        ("Did Dana move in May 2023 or June 2024?", DEC, "2023-05-01", "2024-07-01"),
        ("before 2020 or after 2022", DEC, "-inf", "+inf"),
        ("yesterday and today", DEC, "2026-12-06", "2026-12-08"),
    ]);
}

#[test]
fn text_and_spans() {
    let q = "What did Dana do in May 2024?";
    let w = ground(q, ms(DEC)).unwrap();
    assert_eq!(w.text, "in May 2024");
    assert_eq!(w.spans, vec![(17, 28)]);
    let q = "Where was Dana last week, and what did she buy 3 days ago?";
    let w = ground(q, ms(DEC)).unwrap();
    assert_eq!(w.text, "last week; 3 days ago");
    assert_eq!(w.spans.iter().map(|&(a, b)| &q[a..b]).collect::<Vec<_>>(), ["last week", "3 days ago"]);
    // A "the" belongs to the expressions that take one ("the 1990s"), not to a year used as a name.
    let w = ground("How did the 2024 election go?", ms(DEC)).unwrap();
    assert_eq!(w.text, "2024");
    let w = ground("What happened over the summer of 2023?", ms(DEC)).unwrap();
    assert_eq!(w.text, "over the summer of 2023");
    let q = "Qué hizo Dana el 7 May 2023 ☃?";
    let w = ground(q, ms(DEC)).unwrap();
    assert_eq!(w.text, "7 May 2023");
    assert_eq!((w.from, w.until), (ms("2023-05-07"), ms("2023-05-08")));
}

#[test]
fn references_out_of_range_give_none() {
    assert_eq!(ground("in 2023", i64::MAX), None);
    assert_eq!(ground("in 2023", i64::MIN), None);
    // Near the end of the calendar, what would fall past it is dropped, not a panic.
    let end = ms("9999-12-30T12:00");
    assert_eq!(ground("next year", end), None);
    assert!(ground("last year", end).is_some());
    assert_eq!(ground("in 10000", end), None);
}

/// Words that the recognisers react to, to build questions that exercise them.
#[rustfmt::skip]
const VOCAB: &[&str] = &[
    "in", "on", "the", "of", "from", "to", "between", "and", "since", "until", "before", "after", "by", "last", "this",
    "next", "past", "early", "mid", "late", "-", "–", ",", ".", "'", "s", "th", "May", "may", "march", "Feb", "Sept",
    "summer", "fall", "winter", "Friday", "weekend", "week", "month", "year", "quarter", "half", "first", "end",
    "beginning", "day", "days", "ago", "a", "few", "several", "couple", "today", "yesterday", "night", "q", "h", "0",
    "1", "3", "7", "12", "29", "31", "99", "2019", "2023", "1990", "9999", "0000", "10000", "onwards", "pre", "T",
    "earlier", "ever", "now", "present", "\u{1F600}", "é", "ß", "İ",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_any_text(q in any::<String>(), reference in any::<i64>()) {
        invariants(&q, reference);
    }

    #[test]
    fn never_panics_on_time_words(
        words in prop::collection::vec(prop::sample::select(VOCAB), 0..12),
        glue in prop::collection::vec(any::<bool>(), 12),
        reference in prop_oneof![any::<i64>(), -62_000_000_000_000i64..253_000_000_000_000],
    ) {
        let mut q = String::new();
        for (k, w) in words.iter().enumerate() {
            if k > 0 && !glue[k] {
                q.push(' ');
            }
            q.push_str(w);
        }
        invariants(&q, reference);
    }
}

fn invariants(q: &str, reference: i64) {
    if let Some(w) = ground(q, reference) {
        assert!(w.from < w.until, "{q:?}: {w:?}");
        assert!(OPEN_START <= w.from && w.until <= OPEN_END, "{q:?}: {w:?}");
        let mut last = 0;
        for &(a, b) in &w.spans {
            assert!(last <= a && a < b && b <= q.len(), "{q:?}: {w:?}");
            assert!(q.is_char_boundary(a) && q.is_char_boundary(b));
            last = b;
        }
        let text = w.spans.iter().map(|&(a, b)| &q[a..b]).collect::<Vec<_>>().join("; ");
        assert_eq!(text, w.text);
    }
}
