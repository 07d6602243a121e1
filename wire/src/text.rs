//! Searching the words of span bodies (`text=`): how a body's words are cut and
//! folded, how a search reads, and where it matches in a text. The server indexes
//! exactly the words [`words`] yields and the dashboard marks them by the same rule,
//! so a highlight is where the database matched.
//!
//! A word is a run of letters and digits (any script), folded to lower case, except
//! in the scripts written without spaces between words (Chinese, Japanese, Korean):
//! there each character is a word of its own, and a search for several in a row is
//! a phrase, so any part of a run is found. Only the string values of a body are
//! read, not its keys, numbers or punctuation.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Invalid;

/// Words longer than this (encoded blobs, hashes) are neither indexed nor searched.
pub const MAX_WORD_CHARS: usize = 64;
/// A body's words past this many, or past this many bytes of words, are not
/// indexed (PostgreSQL keeps 16,383 positions and 1 MiB of words a row).
pub const MAX_INDEXED_WORDS: usize = 16_000;
pub const MAX_INDEXED_BYTES: usize = 256 * 1024;
/// The longest search text, in characters.
pub const MAX_TEXT_CHARS: usize = 256;
/// The most words (counting a phrase's) a search may hold.
pub const MAX_TEXT_WORDS: usize = 16;

/// The words of `text`: each one's byte range in `text` and its folded form.
pub fn words(text: &str) -> impl Iterator<Item = (Range<usize>, String)> + '_ {
    word_ranges(text).map(|range| {
        let word = fold(&text[range.clone()]);
        (range, word)
    })
}

/// The byte ranges of the words of `text`, before folding.
fn word_ranges(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut rest = text.char_indices().peekable();
    std::iter::from_fn(move || loop {
        let (start, first) = *rest.peek()?;
        if is_cjk(first) {
            rest.next();
            return Some(start..start + first.len_utf8());
        }
        let mut end = start;
        let mut chars = 0;
        while let Some(&(i, c)) = rest.peek() {
            if !c.is_alphanumeric() || is_cjk(c) {
                break;
            }
            end = i + c.len_utf8();
            chars += 1;
            rest.next();
        }
        if chars == 0 {
            rest.next();
            continue;
        }
        if chars <= MAX_WORD_CHARS {
            return Some(start..end);
        }
    })
}

/// A character of a script written without spaces between words: Han ideographs,
/// kana and Hangul syllables. Each is a word of its own.
fn is_cjk(c: char) -> bool {
    // Most text is below the first of these ranges: one comparison, not sixteen.
    c >= '\u{3040}'
        && matches!(c,
            '\u{3040}'..='\u{30FF}'     // hiragana, katakana
            | '\u{31F0}'..='\u{31FF}'   // katakana phonetic extensions
            | '\u{3400}'..='\u{4DBF}'   // Han, extension A
            | '\u{4E00}'..='\u{9FFF}'   // Han, unified
            | '\u{AC00}'..='\u{D7AF}'   // Hangul syllables
            | '\u{F900}'..='\u{FAFF}'   // Han, compatibility
            | '\u{FF66}'..='\u{FF9F}'   // half-width katakana
            | '\u{20000}'..='\u{3134F}' // Han, extensions B to G
        )
}

fn fold(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    fold_into(word, &mut out);
    out
}

/// Appends `word`, folded, to `out`.
fn fold_into(word: &str, out: &mut String) {
    if word.is_ascii() {
        out.extend(word.bytes().map(|b| char::from(b.to_ascii_lowercase())));
    } else {
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
}

/// The string values of a stored body (compact JSON), in document order; text that
/// is not JSON is one string.
pub fn body_strings(json: &str) -> Vec<String> {
    fn walk(value: Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => out.push(s),
            Value::Array(items) => items.into_iter().for_each(|v| walk(v, out)),
            Value::Object(map) => map.into_iter().for_each(|(_, v)| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    match serde_json::from_str::<Value>(json) {
        Ok(value) => walk(value, &mut out),
        Err(_) => out.push(json.to_string()),
    }
    out
}

/// The folded words of a stored body that the index holds, at most
/// [`MAX_INDEXED_WORDS`] and [`MAX_INDEXED_BYTES`].
pub fn indexed_words(json: &str) -> Vec<String> {
    indexed_text(json)
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// [`indexed_words`] as one string, the words separated by single spaces (a word
/// holds none), as ingest writes them: a string a word, then joined, was most of
/// the cost of an English body's words.
pub fn indexed_text(json: &str) -> String {
    let mut out = String::new();
    let (mut count, mut bytes) = (0, 0);
    for s in body_strings(json) {
        for range in word_ranges(&s) {
            let before = out.len();
            if before > 0 {
                out.push(' ');
            }
            let start = out.len();
            fold_into(&s[range], &mut out);
            bytes += out.len() - start;
            if count == MAX_INDEXED_WORDS || bytes > MAX_INDEXED_BYTES {
                out.truncate(before);
                return out;
            }
            count += 1;
        }
    }
    out
}

/// A body search: every part must occur in one body (a span's input, output or
/// error). A part is a word, or a phrase written in double quotes, whose words must
/// follow one another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextQuery {
    /// As the user wrote it, for the URL and the search box.
    pub raw: String,
    /// Each part's folded words.
    pub parts: Vec<Vec<String>>,
}

impl TextQuery {
    /// Reads `text`; the error names the parameter.
    pub fn parse(raw: &str) -> Result<TextQuery, Invalid> {
        let bad = |message: String| Invalid::new("invalid_text", message);
        if raw.chars().count() > MAX_TEXT_CHARS {
            return Err(bad(format!(
                "text is longer than {MAX_TEXT_CHARS} characters"
            )));
        }
        let mut parts: Vec<Vec<String>> = Vec::new();
        // Between quotes (odd pieces) a phrase; outside them, single words, but
        // words written with nothing between them (a run of Chinese, say) are one
        // phrase.
        for (i, piece) in raw.split('"').enumerate() {
            let found: Vec<(Range<usize>, String)> = words(piece).collect();
            if i % 2 == 1 {
                if !found.is_empty() {
                    parts.push(found.into_iter().map(|(_, w)| w).collect());
                }
                continue;
            }
            let mut end = None;
            for (range, word) in found {
                match parts.last_mut() {
                    Some(part) if end == Some(range.start) => part.push(word),
                    _ => parts.push(vec![word]),
                }
                end = Some(range.end);
            }
        }
        if parts.is_empty() {
            return Err(bad(format!(
                "text has no word to search for (letters or digits, 1 to {MAX_WORD_CHARS} in a row)"
            )));
        }
        let count: usize = parts.iter().map(Vec::len).sum();
        if count > MAX_TEXT_WORDS {
            return Err(bad(format!(
                "text has {count} words; at most {MAX_TEXT_WORDS} are allowed"
            )));
        }
        Ok(TextQuery {
            raw: raw.trim().to_string(),
            parts,
        })
    }

    /// An SQLite FTS5 query of the parts: each a quoted phrase, all of them required.
    /// Words hold letters and digits only, so nothing in them needs escaping.
    pub fn fts5(&self) -> String {
        let phrases: Vec<String> = self
            .parts
            .iter()
            .map(|p| format!("\"{}\"", p.join(" ")))
            .collect();
        phrases.join(" ")
    }

    /// A PostgreSQL `tsquery` of the parts, lexemes written as they are stored.
    pub fn tsquery(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|p| {
                let lexemes: Vec<String> = p.iter().map(|w| format!("'{w}'")).collect();
                format!("({})", lexemes.join(" <-> "))
            })
            .collect();
        parts.join(" & ")
    }

    /// Whether a body of these indexed words (see [`indexed_words`]) matches, as
    /// the index decides it: each part somewhere, a phrase's words in a row.
    pub fn matches(&self, words: &[String]) -> bool {
        self.parts.iter().all(|part| {
            words
                .windows(part.len())
                .any(|window| window.iter().zip(part).all(|(w, p)| w == p))
        })
    }

    /// Where the parts occur in `text`, in order, overlapping ranges merged.
    pub fn marks(&self, text: &str) -> Vec<Range<usize>> {
        let found: Vec<(Range<usize>, String)> = words(text).collect();
        let mut marks = Vec::new();
        for part in &self.parts {
            for window in found.windows(part.len()) {
                if window.iter().zip(part).all(|((_, w), p)| w == p) {
                    marks.push(window[0].0.start..window[part.len() - 1].0.end);
                }
            }
        }
        marks.sort_by_key(|r| (r.start, r.end));
        let mut merged: Vec<Range<usize>> = Vec::with_capacity(marks.len());
        for mark in marks {
            match merged.last_mut() {
                Some(last) if mark.start <= last.end => last.end = last.end.max(mark.end),
                _ => merged.push(mark),
            }
        }
        merged
    }

    /// A short passage of a stored body around its first match, as pieces; the
    /// body's start when no single string holds a match (a phrase across two).
    pub fn snippet(&self, json: &str) -> Vec<Piece> {
        let strings = body_strings(json);
        for s in &strings {
            let marks = self.marks(s);
            if let Some(first) = marks.first() {
                let start = back_to_word(s, first.start, SNIPPET_BEFORE);
                let end =
                    forward_to_word(s, first.start, SNIPPET_CHARS - SNIPPET_BEFORE).max(first.end);
                return pieces(s, start..end, &marks);
            }
        }
        let first = strings.first().map_or("", String::as_str);
        pieces(first, 0..forward_to_word(first, 0, SNIPPET_CHARS), &[])
    }
}

/// Characters a snippet keeps before its first match, and in all.
const SNIPPET_BEFORE: usize = 60;
const SNIPPET_CHARS: usize = 180;

/// A byte offset about `chars` characters before `at`, moved on to a word's start.
fn back_to_word(s: &str, at: usize, chars: usize) -> usize {
    let start = s[..at]
        .char_indices()
        .rev()
        .nth(chars.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    if start == 0 {
        return 0;
    }
    s[start..at]
        .char_indices()
        .find(|(_, c)| c.is_whitespace())
        .map_or(start, |(i, c)| start + i + c.len_utf8())
}

/// A byte offset about `chars` characters after `from`, moved back to a word's end.
fn forward_to_word(s: &str, from: usize, chars: usize) -> usize {
    let Some((end, _)) = s[from..].char_indices().nth(chars) else {
        return s.len();
    };
    let end = from + end;
    s[from..end]
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map_or(end, |(i, _)| from + i)
}

/// One piece of a snippet: plain text, or the words that matched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    pub text: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hit: bool,
}

/// `window` of `s` cut at `marks` (those inside it), runs of white space shown as
/// one space, with an ellipsis where text was left out.
fn pieces(s: &str, window: Range<usize>, marks: &[Range<usize>]) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    let mut push = |text: &str, hit: bool| {
        let text = squeeze(text);
        if !text.is_empty() {
            out.push(Piece { text, hit });
        }
    };
    if window.start > 0 {
        push("…", false);
    }
    let mut at = window.start;
    for mark in marks {
        if mark.start < at || mark.end > window.end {
            continue;
        }
        push(&s[at..mark.start], false);
        push(&s[mark.clone()], true);
        at = mark.end;
    }
    push(&s[at..window.end], false);
    if window.end < s.len() {
        push("…", false);
    }
    // Adjacent plain pieces (an ellipsis beside text) read as one.
    out.dedup_by(|b, a| {
        let join = !a.hit && !b.hit;
        if join {
            a.text.push_str(&b.text);
        }
        join
    });
    out
}

fn squeeze(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    if space {
        out.push(' ');
    }
    out
}

/// Which of a span's bodies matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BodyField {
    Input,
    Output,
    Error,
}

impl BodyField {
    pub const ALL: [BodyField; 3] = [BodyField::Input, BodyField::Output, BodyField::Error];

    /// Its number in the index tables.
    pub fn number(self) -> i64 {
        match self {
            BodyField::Input => 0,
            BodyField::Output => 1,
            BodyField::Error => 2,
        }
    }

    pub fn from_number(n: i64) -> Option<BodyField> {
        BodyField::ALL.into_iter().find(|f| f.number() == n)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BodyField::Input => "input",
            BodyField::Output => "output",
            BodyField::Error => "error",
        }
    }
}

/// Where a trace in a `text=` list matched: its first span (in start order) with a
/// matching body, which body, and a passage of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextMatch {
    pub span_id: String,
    pub field: BodyField,
    pub snippet: Vec<Piece>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(raw: &str) -> TextQuery {
        TextQuery::parse(raw).expect("parses")
    }

    #[test]
    fn words_fold_case_in_any_script_and_skip_blobs() {
        let found: Vec<String> = words("Grüße, ΟΔΥΣΣΕΥΣ! tool_call 3.14")
            .map(|(_, w)| w)
            .collect();
        assert_eq!(found, ["grüße", "οδυσσευσ", "tool", "call", "3", "14"]);
        let blob = "a".repeat(MAX_WORD_CHARS + 1);
        let found: Vec<String> = words(&format!("x {blob} y")).map(|(_, w)| w).collect();
        assert_eq!(found, ["x", "y"]);
    }

    #[test]
    fn chinese_japanese_and_korean_characters_are_words_of_their_own() {
        let found: Vec<String> = words("今天讨论GPT4模型, 東京タワー 서울에서")
            .map(|(_, w)| w)
            .collect();
        assert_eq!(
            found,
            [
                "今", "天", "讨", "论", "gpt4", "模", "型", "東", "京", "タ", "ワ", "ー", "서",
                "울", "에", "서"
            ]
        );
        // Written together, they are a phrase; apart, each is a part of its own.
        assert_eq!(
            q("讨论 模型").parts,
            vec![
                vec!["讨".to_string(), "论".into()],
                vec!["模".into(), "型".into()]
            ]
        );
        assert_eq!(
            q("gpt4模型").parts,
            vec![vec!["gpt4".to_string(), "模".into(), "型".into()]]
        );
        let body = indexed_words(r#"{"content":"今天讨论GPT4模型, 東京タワー 서울에서"}"#);
        for hit in ["讨论", "GPT4模型", "タワー", "서울", "\"天讨\""] {
            assert!(q(hit).matches(&body), "{hit}");
        }
        for miss in ["论讨", "京東", "울서"] {
            assert!(!q(miss).matches(&body), "{miss}");
        }
        let text = "今天讨论GPT4模型";
        let marks = q("讨论").marks(text);
        let marked: Vec<&str> = marks.iter().map(|r| &text[r.clone()]).collect();
        assert_eq!(marked, ["讨论"]);
    }

    #[test]
    fn a_search_reads_words_and_quoted_phrases() {
        let text = q(r#"Traceback "I cannot" KeyError"#);
        assert_eq!(
            text.parts,
            vec![
                vec!["traceback".to_string()],
                vec!["i".into(), "cannot".into()],
                vec!["keyerror".into()]
            ]
        );
        assert_eq!(text.fts5(), r#""traceback" "i cannot" "keyerror""#);
        assert_eq!(
            text.tsquery(),
            "('traceback') & ('i' <-> 'cannot') & ('keyerror')"
        );
        // An unclosed quote runs to the end.
        assert_eq!(
            q(r#""no way"#).parts,
            vec![vec!["no".to_string(), "way".into()]]
        );
    }

    #[test]
    fn a_search_without_words_or_too_long_names_the_parameter() {
        for raw in ["", "  \"\" ", "!!!"] {
            let e = TextQuery::parse(raw).expect_err(raw);
            assert_eq!(e.code, "invalid_text");
            assert!(e.message.starts_with("text "), "{}", e.message);
        }
        assert!(TextQuery::parse(&"a ".repeat(17)).is_err());
        assert!(TextQuery::parse(&"a".repeat(300)).is_err());
    }

    #[test]
    fn only_string_values_are_indexed() {
        let json = r#"{"messages":[{"role":"user","content":"Why?"}],"n":42,"ok":"Yes"}"#;
        assert_eq!(indexed_words(json), ["user", "why", "yes"]);
        assert_eq!(indexed_words("\"plain text\""), ["plain", "text"]);
    }

    #[test]
    fn a_long_body_indexes_its_first_words_up_to_the_limits() {
        let many = serde_json::Value::String("Word ".repeat(MAX_INDEXED_WORDS + 5)).to_string();
        let text = indexed_text(&many);
        assert_eq!(text.split(' ').count(), MAX_INDEXED_WORDS);
        assert!(text.starts_with("word word") && text.ends_with("word"));
        // 64-letter words: the bytes run out first.
        let long = format!("{} ", "x".repeat(MAX_WORD_CHARS)).repeat(5_000);
        let text = indexed_text(&serde_json::Value::String(long).to_string());
        assert_eq!(text.split(' ').count(), MAX_INDEXED_BYTES / MAX_WORD_CHARS);
        assert!(text.ends_with('x'));
    }

    #[test]
    fn a_body_matches_when_every_part_is_in_it() {
        let words = indexed_words(r#"{"a":"Sorry, I cannot.","b":"Traceback here"}"#);
        assert!(q(r#""i cannot" traceback"#).matches(&words));
        assert!(
            q(r#""cannot traceback""#).matches(&words),
            "across strings, as indexed"
        );
        assert!(!q(r#""cannot i""#).matches(&words));
        assert!(!q("cannot elephant").matches(&words));
    }

    #[test]
    fn marks_find_phrases_and_words_in_place() {
        let text = "Sorry, I CANNOT do that; i cannot.";
        let marks = q(r#""i cannot""#).marks(text);
        let marked: Vec<&str> = marks.iter().map(|r| &text[r.clone()]).collect();
        assert_eq!(marked, ["I CANNOT", "i cannot"]);
        assert!(q(r#""cannot i""#).marks(text).is_empty());
    }

    #[test]
    fn a_snippet_cuts_around_the_first_match() {
        let long = format!(
            "{} the tool printed Traceback here {}",
            "word ".repeat(50),
            "tail ".repeat(60)
        );
        let json = serde_json::to_string(&serde_json::json!({"out": long})).expect("json");
        let pieces = q("traceback").snippet(&json);
        assert!(pieces[0].text.starts_with('…'), "{pieces:?}");
        assert!(pieces.last().is_some_and(|p| p.text.ends_with('…')));
        let hits: Vec<&str> = pieces
            .iter()
            .filter(|p| p.hit)
            .map(|p| p.text.as_str())
            .collect();
        assert_eq!(hits, ["Traceback"]);
        let shown: usize = pieces.iter().map(|p| p.text.chars().count()).sum();
        assert!(shown <= SNIPPET_CHARS + 2, "{shown}");
    }
}
