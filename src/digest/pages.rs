//! Pages: every digested document is kept as a page, a subject
//! `Page:<uuid v7>` with `title`, `body`, `source`, `content_type` and one
//! `mentions` edge per entity it names, written in the digest's own
//! transaction. Context packets attach the pages that mention their
//! entities (`crate::recall::context`).

use crate::store::{is_entity_ref, FactInput, MAX_VALUE_BYTES};

pub const PAGE_TYPE: &str = "Page";
pub const MENTIONS: &str = "mentions";
/// Longest title, in characters.
pub const MAX_TITLE_CHARS: usize = 120;
/// Most `mentions` edges one page gets.
pub const MAX_MENTIONS: usize = 1000;
/// Longest body, in bytes: the engine's value limit less the JSON quotes.
pub const MAX_BODY_BYTES: usize = MAX_VALUE_BYTES - 2;

pub fn new_page_id() -> String {
    format!("{PAGE_TYPE}:{}", uuid::Uuid::now_v7())
}

pub fn is_page(subject: &str) -> bool {
    subject.strip_prefix(PAGE_TYPE).is_some_and(|r| r.starts_with(':'))
}

/// `s` cut to at most `max` bytes, on a character boundary.
pub fn cut_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` cut to at most `max` characters, with `…` when cut.
pub fn cut_chars(s: &str, max: usize) -> String {
    let mut it = s.chars();
    let head: String = it.by_ref().take(max).collect();
    if it.next().is_some() {
        format!("{}…", head.trim_end())
    } else {
        head
    }
}

/// The first line of text that is not blank, without Markdown heading marks.
pub fn first_line(text: &str) -> Option<String> {
    text.lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty() && *l != "---")
        .map(|l| cut_chars(l, MAX_TITLE_CHARS))
}

/// Entity refs named in free text: whitespace-separated words of the shape
/// `Type:id` whose type starts with an upper-case letter (so URL schemes
/// like `https:` and `mailto:` are not entities), with surrounding
/// punctuation, quotes, brackets and Markdown emphasis stripped. Masked
/// tokens (`[EMAIL:…]`) are not entities. In order of first appearance.
pub fn entity_refs(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        let w = word.trim_start_matches(|c: char| "({<\"'`*_".contains(c));
        let w = w.trim_end_matches(|c: char| ".,;:!?)}>\"'`*_".contains(c));
        if w.contains('[') || w.contains(']') {
            continue;
        }
        let upper = w.chars().next().is_some_and(|c| c.is_ascii_uppercase());
        let url_like = w.split_once(':').is_some_and(|(_, id)| id.starts_with("//"));
        if upper && !url_like && is_entity_ref(w) && !out.iter().any(|x| x == w) {
            out.push(w.to_string());
        }
    }
    out
}

/// The page's own facts (title, body, source, content type); its
/// `mentions` are added by the caller.
pub fn page_facts(page: &str, title: &str, body: &str, source: &str, content_type: &str) -> Vec<FactInput> {
    [("title", title), ("body", body), ("source", source), ("content_type", content_type)]
        .into_iter()
        .map(|(p, v)| FactInput::new(page, p, v).source(source))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_in_text() {
        let t = "Met (Person:sarah) of **Org:acme**, see https://x.io/a and mailto:a@b, \"Deal:42\". Ref [EMAIL:abc] x:y Person:sarah";
        assert_eq!(entity_refs(t), vec!["Person:sarah", "Org:acme", "Deal:42"]);
    }

    #[test]
    fn cutting() {
        assert_eq!(cut_bytes("héllo", 2), "h");
        assert_eq!(cut_chars("abcdef", 3), "abc…");
        assert_eq!(first_line("\n\n## Title here\nbody").as_deref(), Some("Title here"));
        assert!(is_page("Page:0190") && !is_page("Pages:x"));
    }
}
