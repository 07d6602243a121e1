//! The trace list's query string (docs/api.md §8.4), one type at both ends: the
//! dashboard writes it with [`ListQuery::to_query`] and the server reads it with
//! [`ListQuery::parse`]. Reading is lenient, as a hand-typed URL needs: empty values
//! are ignored, the last of a repeated name wins, `filter` repeats, and names the
//! list does not take are left for the endpoint (an export's `step`).

use crate::filter::{TraceFilter, ATTR_PREFIX, MAX_FILTERS, NOTE_PREFIX};
use crate::limits::{MAX_SEARCH_TERMS, TRACES_PAGE_MAX};
use crate::text::TextQuery;
use crate::{check_id, Invalid, SpanKind, SpanStatus};

/// The order of a trace list.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum TraceSort {
    #[default]
    Updated,
    Duration,
    Spans,
    Tokens,
    Errors,
    Iterations,
    /// A numeric root attribute; traces without it come last in either order.
    Attr(String),
    /// A number or boolean annotation, on the trace or a span of it (the greatest of
    /// a trace's, whoever made them); traces without one come last in either order.
    Note(String),
}

impl TraceSort {
    /// Parses a `sort` value, or says which values are valid.
    pub fn parse(text: &str) -> Result<TraceSort, Invalid> {
        Ok(match text {
            "updated" => TraceSort::Updated,
            "duration" => TraceSort::Duration,
            "spans" => TraceSort::Spans,
            "tokens" => TraceSort::Tokens,
            "errors" => TraceSort::Errors,
            "iterations" => TraceSort::Iterations,
            other => match (
                other.strip_prefix(ATTR_PREFIX),
                other.strip_prefix(NOTE_PREFIX),
            ) {
                (Some(key), _) if !key.is_empty() && !key.contains('"') => {
                    TraceSort::Attr(key.to_string())
                }
                (_, Some(name)) if crate::annotations::check_name(name).is_ok() => {
                    TraceSort::Note(name.to_string())
                }
                _ => {
                    return Err(Invalid::new(
                        "invalid_parameter",
                        format!(
                            "sort {other:?} is not valid; valid values are: updated, duration, \
                             spans, tokens, errors, iterations, attr.NAME for a numeric root attribute, \
                             or note.NAME for a number or boolean annotation"
                        ),
                    ))
                }
            },
        })
    }

    /// The `sort` value that reads back as this order.
    pub fn param(&self) -> String {
        match self {
            TraceSort::Updated => "updated".into(),
            TraceSort::Duration => "duration".into(),
            TraceSort::Spans => "spans".into(),
            TraceSort::Tokens => "tokens".into(),
            TraceSort::Errors => "errors".into(),
            TraceSort::Iterations => "iterations".into(),
            TraceSort::Attr(key) => format!("{ATTR_PREFIX}{key}"),
            TraceSort::Note(name) => format!("{NOTE_PREFIX}{name}"),
        }
    }
}

/// A trace list's parameters, checked. Defaults are the unfiltered list, newest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListQuery {
    /// One run's traces, for `GET /api/traces` (a run's own list has it in its path).
    pub run_id: Option<String>,
    pub project: Option<String>,
    /// Root statuses, any of which may match.
    pub statuses: Vec<SpanStatus>,
    /// Traces holding a span of any of these kinds.
    pub kinds: Vec<SpanKind>,
    /// Search terms, all of which must match.
    pub terms: Vec<String>,
    /// Words and phrases one of a trace's span bodies must hold (`text`).
    pub text: Option<TextQuery>,
    /// All must hold.
    pub filters: Vec<TraceFilter>,
    pub since_us: Option<i64>,
    pub until_us: Option<i64>,
    pub min_step: Option<i64>,
    pub max_step: Option<i64>,
    pub sort: TraceSort,
    pub ascending: bool,
    /// None: the server's page size.
    pub limit: Option<usize>,
    /// The previous page's `next_cursor`, as the server wrote it.
    pub cursor: Option<String>,
}

/// A query string read leniently, so that every problem is ours to word: empty
/// values are dropped and a repeated name keeps its last value, except where
/// [`QueryParams::all`] asks for each.
pub struct QueryParams(Vec<(String, String)>);

impl QueryParams {
    pub fn new(raw: &str) -> Self {
        QueryParams(
            form_urlencoded::parse(raw.as_bytes())
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value given for `name`, in order.
    pub fn all<'p>(&'p self, name: &'p str) -> impl Iterator<Item = &'p str> + 'p {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn int(&self, name: &str) -> Result<Option<i64>, Invalid> {
        self.text(name)
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    Invalid::new("invalid_parameter", format!("{name} must be an integer"))
                })
            })
            .transpose()
    }

    pub fn non_negative(&self, name: &str) -> Result<Option<i64>, Invalid> {
        match self.int(name)? {
            Some(v) if v < 0 => Err(Invalid::new(
                "invalid_parameter",
                format!("{name} must be a non-negative integer"),
            )),
            other => Ok(other),
        }
    }

    /// `limit`, from 1 to `max`; `default` when absent.
    pub fn limit(&self, default: usize, max: usize) -> Result<usize, Invalid> {
        self.count("limit", default, max)
    }

    /// A count `name` from 1 to `max`; `default` when absent.
    pub fn count(&self, name: &str, default: usize, max: usize) -> Result<usize, Invalid> {
        match self.int(name)? {
            None => Ok(default),
            Some(n) if n >= 1 && n as usize <= max => Ok(n as usize),
            Some(_) => Err(Invalid::new(
                "invalid_parameter",
                format!("{name} must be between 1 and {max}"),
            )),
        }
    }

    /// `max_points` of a metric read, from 2 to 100,000; `default` when absent.
    pub fn max_points(&self, default: usize) -> Result<usize, Invalid> {
        use crate::limits::{METRIC_POINTS_MAX, METRIC_POINTS_MIN};
        match self.int("max_points")? {
            None => Ok(default),
            Some(n) => usize::try_from(n)
                .ok()
                .filter(|n| (METRIC_POINTS_MIN..=METRIC_POINTS_MAX).contains(n))
                .ok_or_else(|| {
                    Invalid::new(
                        "invalid_parameter",
                        format!(
                            "max_points must be between {METRIC_POINTS_MIN} and {METRIC_POINTS_MAX}"
                        ),
                    )
                }),
        }
    }

    /// The comma list `name`, each item parsed (an absent one is empty).
    fn list<T>(
        &self,
        name: &str,
        parse: impl Fn(&str, &str) -> Result<T, Invalid>,
    ) -> Result<Vec<T>, Invalid> {
        self.text(name)
            .map_or(Ok(Vec::new()), |list| parse_comma(list, name, parse))
    }
}

/// A comma list such as `status=error,ok`, each item trimmed and parsed.
pub fn parse_comma<T>(
    list: &str,
    name: &str,
    parse: impl Fn(&str, &str) -> Result<T, Invalid>,
) -> Result<Vec<T>, Invalid> {
    list.split(',').map(|s| parse(s.trim(), name)).collect()
}

/// `order`: true for `asc`, false for `desc`.
pub fn parse_order(text: &str) -> Result<bool, Invalid> {
    match text {
        "desc" => Ok(false),
        "asc" => Ok(true),
        other => Err(Invalid::new(
            "invalid_parameter",
            format!("order {other:?} is not valid; use asc or desc"),
        )),
    }
}

impl ListQuery {
    /// Reads a query string; the first problem found is the error, naming its
    /// parameter.
    pub fn parse(raw: &str) -> Result<ListQuery, Invalid> {
        let p = QueryParams::new(raw);
        let run_id = p.text("run_id").map(str::to_string);
        if let Some(id) = &run_id {
            check_id(id, "run_id")?;
        }
        let statuses = p.list("status", SpanStatus::parse_field)?;
        let kinds = p.list("kind", SpanKind::parse_field)?;
        let terms: Vec<String> = p
            .text("q")
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        if terms.len() > MAX_SEARCH_TERMS {
            return Err(Invalid::new(
                "too_many_terms",
                format!(
                    "q has {} terms; at most {MAX_SEARCH_TERMS} are allowed",
                    terms.len()
                ),
            ));
        }
        let text = p.text("text").map(TextQuery::parse).transpose()?;
        let given = p.all("filter").count();
        if given > MAX_FILTERS {
            return Err(Invalid::new(
                "bad_filter",
                format!("{given} filters given; at most {MAX_FILTERS} are allowed"),
            ));
        }
        let filters = p
            .all("filter")
            .map(TraceFilter::parse)
            .collect::<Result<_, _>>()?;
        let sort = p
            .text("sort")
            .map_or(Ok(TraceSort::Updated), TraceSort::parse)?;
        let ascending = p.text("order").map_or(Ok(false), parse_order)?;
        let since_us = p.int("since_us")?;
        let until_us = p.int("until_us")?;
        let min_step = p.non_negative("min_step")?;
        let max_step = p.non_negative("max_step")?;
        let limit = p
            .text("limit")
            .map(|_| p.limit(TRACES_PAGE_MAX, TRACES_PAGE_MAX))
            .transpose()?;
        Ok(ListQuery {
            run_id,
            project: p.text("project").map(str::to_string),
            statuses,
            kinds,
            terms,
            text,
            filters,
            since_us,
            until_us,
            min_step,
            max_step,
            sort,
            ascending,
            limit,
            cursor: p.text("cursor").map(str::to_string),
        })
    }

    /// Writes the query string that [`ListQuery::parse`] reads back as `self`,
    /// leaving out what is at its default.
    pub fn to_query(&self) -> String {
        self.to_query_with(Vec::new())
    }

    /// [`ListQuery::to_query`] followed by a view's own parameters (those that
    /// have a value), for the views that take a list's filters.
    pub fn to_query_with(&self, own: Vec<(&str, Option<String>)>) -> String {
        let comma = |items: Vec<&str>| (!items.is_empty()).then(|| items.join(","));
        let number = |n: Option<i64>| n.map(|n| n.to_string());
        let mut pairs: Vec<(&str, Option<String>)> = vec![
            ("run_id", self.run_id.clone()),
            ("project", self.project.clone()),
            (
                "status",
                comma(self.statuses.iter().map(|s| s.as_str()).collect()),
            ),
            (
                "kind",
                comma(self.kinds.iter().map(|k| k.as_str()).collect()),
            ),
            ("q", (!self.terms.is_empty()).then(|| self.terms.join(" "))),
            ("text", self.text.as_ref().map(|t| t.raw.clone())),
        ];
        pairs.extend(self.filters.iter().map(|f| ("filter", Some(f.to_string()))));
        pairs.extend([
            ("since_us", number(self.since_us)),
            ("until_us", number(self.until_us)),
            ("min_step", number(self.min_step)),
            ("max_step", number(self.max_step)),
            (
                "sort",
                (self.sort != TraceSort::Updated).then(|| self.sort.param()),
            ),
            ("order", self.ascending.then(|| "asc".to_string())),
            ("limit", self.limit.map(|n| n.to_string())),
            ("cursor", self.cursor.clone()),
        ]);
        pairs.extend(own);
        let mut out = form_urlencoded::Serializer::new(String::new());
        for (name, value) in pairs {
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                out.append_pair(name, &value);
            }
        }
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_parameter() -> ListQuery {
        ListQuery {
            run_id: Some("run-1".into()),
            project: Some("cart pole & co".into()),
            statuses: vec![SpanStatus::Error, SpanStatus::Ok],
            kinds: vec![SpanKind::Model, SpanKind::Tool],
            terms: vec!["physics".into(), "t=3".into()],
            text: Some(TextQuery::parse(r#""I cannot" & Traceback+"#).unwrap()),
            filters: vec![
                TraceFilter::parse("attr.reward < 0.5").unwrap(),
                TraceFilter::parse(r#"attr.task = "a b&c=d""#).unwrap(),
                TraceFilter::parse("error_count > 0").unwrap(),
                TraceFilter::parse("attr.seed exists").unwrap(),
            ],
            since_us: Some(-5),
            until_us: Some(1_780_000_000_000_000),
            min_step: Some(0),
            max_step: Some(340),
            sort: TraceSort::Attr("reward".into()),
            ascending: true,
            limit: Some(TRACES_PAGE_MAX),
            cursor: Some("eyJhIjoxfQ==+/".into()),
        }
    }

    #[test]
    fn every_parameter_reads_back_as_written() {
        let query = every_parameter();
        assert_eq!(ListQuery::parse(&query.to_query()), Ok(query));
        for sort in [
            "updated",
            "duration",
            "spans",
            "tokens",
            "errors",
            "note.score",
        ] {
            let q = ListQuery {
                sort: TraceSort::parse(sort).unwrap(),
                ..ListQuery::default()
            };
            assert_eq!(ListQuery::parse(&q.to_query()), Ok(q));
        }
        assert_eq!(ListQuery::default().to_query(), "");
        assert_eq!(ListQuery::parse(""), Ok(ListQuery::default()));
    }

    #[test]
    fn reading_is_lenient() {
        // Empty values are ignored, the last value wins, and filter repeats.
        let q = ListQuery::parse(
            "status=&kind=model&kind=tool&q=&filter=error_count%20%3E%200&filter=attr.x%20exists&limit=7&other=1",
        )
        .unwrap();
        assert_eq!(q.kinds, [SpanKind::Tool]);
        assert!(q.statuses.is_empty() && q.terms.is_empty());
        assert_eq!(q.filters.len(), 2);
        assert_eq!(q.limit, Some(7));
        // A space may come as `+` or `%20`.
        assert_eq!(
            ListQuery::parse("q=a+b%20c").unwrap().terms,
            ["a", "b", "c"]
        );
    }

    #[test]
    fn each_bad_parameter_is_named() {
        let cases = [
            ("run_id=..", "run_id"),
            ("status=fine", "status \"fine\" is not a valid"),
            ("kind=robot", "kind \"robot\" is not a valid"),
            ("q=a b c d e f g h i", "q has 9 terms; at most 8"),
            ("filter=reward", "filter \"reward\""),
            ("sort=size", "sort \"size\" is not valid"),
            ("sort=note.", "sort \"note.\" is not valid"),
            ("sort=note.a%3Db", "sort \"note.a=b\" is not valid"),
            ("order=up", "order \"up\" is not valid"),
            ("since_us=today", "since_us must be an integer"),
            ("until_us=1.5", "until_us must be an integer"),
            ("min_step=-1", "min_step must be a non-negative integer"),
            ("max_step=x", "max_step must be an integer"),
            ("limit=0", "limit must be between 1 and 500"),
            ("limit=501", "limit must be between 1 and 500"),
        ];
        for (raw, says) in cases {
            let err = ListQuery::parse(raw).unwrap_err();
            assert!(err.message.contains(says), "{raw}: {}", err.message);
        }
        let many = ["filter=error_count%20%3E%200"; MAX_FILTERS + 1].join("&");
        assert_eq!(ListQuery::parse(&many).unwrap_err().code, "bad_filter");
    }
}
