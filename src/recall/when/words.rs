//! The question as a list of words, numbers and marks with their byte
//! offsets, and the vocabulary of time the patterns read it with.

/// What a token is. Letters and digits never share a token ("7th" is the
/// number 7 glued to the word "th"), so the patterns see "Q1", "2023km" and
/// "mid-2022" as their parts and decide from the glue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Word,
    Num,
    Mark,
}

#[derive(Debug, Clone)]
pub(super) struct Token<'q> {
    pub kind: Kind,
    /// As written.
    pub text: &'q str,
    /// Lower-cased (words); as written otherwise.
    pub lower: String,
    pub start: usize,
    pub end: usize,
    /// Whitespace, or the start of the question, comes right before it.
    pub spaced: bool,
}

pub(super) struct Words<'q> {
    pub toks: Vec<Token<'q>>,
}

impl<'q> Words<'q> {
    pub fn new(question: &'q str) -> Words<'q> {
        let mut toks = Vec::new();
        let mut spaced = true;
        let mut chars = question.char_indices().peekable();
        while let Some((start, c)) = chars.next() {
            if c.is_whitespace() {
                spaced = true;
                continue;
            }
            let kind = if c.is_ascii_digit() {
                Kind::Num
            } else if c.is_alphabetic() {
                Kind::Word
            } else {
                Kind::Mark
            };
            let mut end = start + c.len_utf8();
            if kind != Kind::Mark {
                while let Some(&(at, n)) = chars.peek() {
                    let same = match kind {
                        Kind::Num => n.is_ascii_digit(),
                        _ => n.is_alphabetic(),
                    };
                    if !same {
                        break;
                    }
                    end = at + n.len_utf8();
                    chars.next();
                }
            }
            let text = &question[start..end];
            let lower = if kind == Kind::Word { text.to_lowercase() } else { text.to_string() };
            toks.push(Token { kind, text, lower, start, end, spaced });
            spaced = false;
        }
        Words { toks }
    }

    pub fn len(&self) -> usize {
        self.toks.len()
    }

    /// The lower-cased text of token `i` ("" past the end).
    pub fn at(&self, i: usize) -> &str {
        self.toks.get(i).map_or("", |t| t.lower.as_str())
    }

    pub fn is(&self, i: usize, text: &str) -> bool {
        self.at(i) == text
    }

    /// Token `i` is one of `texts`.
    pub fn any(&self, i: usize, texts: &[&str]) -> bool {
        texts.contains(&self.at(i))
    }

    /// The word sequence `seq` starts at `i`; the index after it.
    pub fn seq(&self, i: usize, seq: &[&str]) -> Option<usize> {
        seq.iter().enumerate().all(|(k, w)| self.is(i + k, w)).then_some(i + seq.len())
    }

    pub fn kind(&self, i: usize) -> Option<Kind> {
        self.toks.get(i).map(|t| t.kind)
    }

    /// Token `i` exists and touches the token before it (no space between).
    pub fn glued(&self, i: usize) -> bool {
        self.toks.get(i).is_some_and(|t| !t.spaced)
    }

    /// Token `i` is a number: its value and its count of digits.
    pub fn num(&self, i: usize) -> Option<(u32, usize)> {
        let t = self.toks.get(i)?;
        if t.kind != Kind::Num || t.text.len() > 9 {
            return None;
        }
        Some((t.text.parse().ok()?, t.text.len()))
    }

    /// Token `i` starts with a capital letter.
    pub fn capitalised(&self, i: usize) -> bool {
        self.toks.get(i).and_then(|t| t.text.chars().next()).is_some_and(char::is_uppercase)
    }

    /// The word before `i`, skipping one "the" ("in the summer").
    pub fn cue_before(&self, i: usize) -> (&str, usize) {
        match i.checked_sub(1) {
            Some(p) if self.is(p, "the") && p > 0 => (self.at(p - 1), p - 1),
            Some(p) => (self.at(p), p),
            None => ("", usize::MAX),
        }
    }
}

/// A month's number from its name or abbreviation, and whether it is the full name.
pub(super) fn month(word: &str) -> Option<(u8, bool)> {
    #[rustfmt::skip]
    const FULL: [&str; 12] = [
        "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
        "november", "december",
    ];
    const SHORT: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    if let Some(m) = FULL.iter().position(|&n| n == word) {
        return Some((m as u8 + 1, true));
    }
    if word == "sept" {
        return Some((9, false));
    }
    SHORT.iter().position(|&n| n == word).map(|m| (m as u8 + 1, false))
}

/// Month names that are also common English words ("May I ask", "they march",
/// "an august body"): written in lower case after a weak cue they stay words.
pub(super) fn month_is_also_a_word(word: &str) -> bool {
    matches!(word, "may" | "march" | "august")
}

/// Monday = 0 .. Sunday = 6, from the full name.
pub(super) fn weekday(word: &str) -> Option<i8> {
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
        .iter()
        .position(|&n| n == word)
        .map(|d| d as i8)
}

/// Weekday abbreviations, read only in front of a date ("Fri, 3 May 2024"):
/// alone, "sun", "sat" and "wed" are words.
pub(super) fn weekday_short(word: &str) -> bool {
    matches!(word, "mon" | "tue" | "tues" | "wed" | "thu" | "thur" | "thurs" | "fri" | "sat" | "sun")
}

/// Holidays named after a weekday ("Good Friday", "Cyber Monday"): not grounded.
pub(super) fn holiday_before_weekday(word: &str) -> bool {
    matches!(
        word,
        "good" | "black" | "cyber" | "ash" | "holy" | "easter" | "palm" | "super" | "blue" | "maundy" | "whit"
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Season {
    Spring,
    Summer,
    Autumn,
    Winter,
}

pub(super) fn season(word: &str) -> Option<Season> {
    match word {
        "spring" => Some(Season::Spring),
        "summer" => Some(Season::Summer),
        "autumn" | "fall" => Some(Season::Autumn),
        "winter" => Some(Season::Winter),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

pub(super) fn unit(word: &str) -> Option<Unit> {
    match word {
        "minute" | "minutes" | "min" | "mins" => Some(Unit::Minute),
        "hour" | "hours" | "hr" | "hrs" => Some(Unit::Hour),
        "day" | "days" => Some(Unit::Day),
        "week" | "weeks" | "wk" | "wks" => Some(Unit::Week),
        "month" | "months" | "mo" | "mos" => Some(Unit::Month),
        "year" | "years" | "yr" | "yrs" => Some(Unit::Year),
        _ => None,
    }
}

/// "one" .. "twenty", "a", "an".
pub(super) fn number_word(word: &str) -> Option<u32> {
    #[rustfmt::skip]
    const WORDS: [&str; 20] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
    ];
    if matches!(word, "a" | "an") {
        return Some(1);
    }
    WORDS.iter().position(|&w| w == word).map(|n| n as u32 + 1)
}

/// "first" .. "fourth" and "last" (= 5) as the rank of a week, half or quarter.
pub(super) fn rank(word: &str) -> Option<u8> {
    match word {
        "first" => Some(1),
        "second" => Some(2),
        "third" => Some(3),
        "fourth" => Some(4),
        "last" | "final" => Some(5),
        _ => None,
    }
}

pub(super) fn ordinal_suffix(word: &str) -> bool {
    matches!(word, "st" | "nd" | "rd" | "th")
}

/// Words that make the number before them a count or a measure, not a year
/// or a day: "2023 photos", "1990 km", "May 5 people".
pub(super) fn counted(word: &str) -> bool {
    #[rustfmt::skip]
    const COUNTED: &[&str] = &[
        "people", "persons", "users", "customers", "clients", "members", "employees", "staff", "students",
        "visitors", "followers", "subscribers", "participants", "attendees", "votes", "photos", "pictures",
        "images", "videos", "files", "documents", "docs", "pages", "words", "characters", "lines", "items",
        "entries", "records", "rows", "messages", "emails", "mails", "tokens", "points", "steps", "calories",
        "kcal", "times", "copies", "units", "pieces", "books", "songs", "tracks", "cars", "dollars", "euros",
        "pounds", "yen", "cents", "bucks", "usd", "eur", "gbp", "miles", "mi", "km", "kilometers", "kilometres",
        "meters", "metres", "m", "cm", "mm", "ft", "feet", "inches", "kg", "kilograms", "grams", "g", "lb",
        "lbs", "tons", "tonnes", "liters", "litres", "ml", "kb", "mb", "gb", "tb", "k", "x", "am", "pm",
        "seconds", "secs", "percent", "per",
    ];
    unit(word).is_some() || COUNTED.contains(&word)
}

/// Words that make the number after them a label or a quantity, not a year:
/// "page 2023", "room 2010", "more than 2000".
pub(super) fn numbered(word: &str) -> bool {
    #[rustfmt::skip]
    const NUMBERED: &[&str] = &[
        "than", "number", "no", "nr", "num", "page", "pages", "p", "pp", "room", "version", "v", "ticket",
        "order", "invoice", "item", "line", "chapter", "section", "model", "flight", "route", "bus",
        "apartment", "apt", "suite", "id", "code", "pin", "zip", "box", "account", "issue", "pr", "build",
        "port", "step", "level", "score", "rank", "table", "seat", "gate", "row", "exit",
    ];
    NUMBERED.contains(&word)
}

/// Marks that make a number next to them money, a rank or a part of a longer number.
pub(super) fn numeric_mark(text: &str) -> bool {
    matches!(text, "$" | "€" | "£" | "¥" | "#" | "%" | "+" | "_" | "=" | "*" | "^" | "@")
}
