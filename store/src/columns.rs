//! Rows of arguments turned into one array per column, for PostgreSQL's
//! `UNNEST($1, $2, …)`: a batch then binds one argument a column rather than one a
//! value, and its statement text is the same whatever the row count, so the server
//! parses and plans it once per connection instead of once per batch.

use std::borrow::Cow;

use sqlx::postgres::PgArguments;
use sqlx::sqlite::SqliteArguments;

use super::dialect::Arg;

/// One column's values, in row order.
#[derive(Debug)]
pub enum Column<'a> {
    Text(Vec<Option<Cow<'a, str>>>),
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Bool(Vec<bool>),
    Bytes(Vec<Option<&'a [u8]>>),
}

/// Which [`Column`] an argument goes into.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Int,
    Float,
    Bool,
    Bytes,
    /// Not a value a column holds.
    Other,
}

fn kind(arg: &Arg<'_>) -> Kind {
    match arg {
        Arg::Owned(_) | Arg::Text(_) | Arg::OptText(_) => Kind::Text,
        Arg::Int(_) | Arg::OptInt(_) => Kind::Int,
        Arg::Float(_) | Arg::OptFloat(_) => Kind::Float,
        Arg::Bool(_) => Kind::Bool,
        Arg::OptBytes(_) => Kind::Bytes,
        Arg::Column(_) => Kind::Other,
    }
}

/// The rows' columns, or the rows back when there are none or a column mixes kinds
/// (every statement binds one kind a column; the caller then writes `VALUES`).
pub(crate) fn transpose<const N: usize>(
    rows: Vec<[Arg<'_>; N]>,
) -> Result<Vec<Column<'_>>, Vec<[Arg<'_>; N]>> {
    let Some(first) = rows.first() else {
        return Err(rows);
    };
    let kinds = first.each_ref().map(kind);
    let uniform = !kinds.contains(&Kind::Other)
        && rows
            .iter()
            .all(|row| row.iter().zip(&kinds).all(|(arg, k)| kind(arg) == *k));
    if !uniform {
        return Err(rows);
    }
    let n = rows.len();
    let mut columns: Vec<Column<'_>> = kinds
        .iter()
        .map(|k| match k {
            Kind::Int => Column::Int(Vec::with_capacity(n)),
            Kind::Float => Column::Float(Vec::with_capacity(n)),
            Kind::Bool => Column::Bool(Vec::with_capacity(n)),
            Kind::Bytes => Column::Bytes(Vec::with_capacity(n)),
            Kind::Text | Kind::Other => Column::Text(Vec::with_capacity(n)),
        })
        .collect();
    for row in rows {
        for (column, arg) in columns.iter_mut().zip(row) {
            column.push(arg);
        }
    }
    Ok(columns)
}

impl<'a> Column<'a> {
    /// Appends `arg`, which [`transpose`] checked is of this column's kind.
    fn push(&mut self, arg: Arg<'a>) {
        match (self, arg) {
            (Column::Text(c), Arg::Owned(v)) => c.push(Some(Cow::Owned(v))),
            (Column::Text(c), Arg::Text(v)) => c.push(Some(Cow::Borrowed(v))),
            (Column::Text(c), Arg::OptText(v)) => c.push(v.map(Cow::Borrowed)),
            (Column::Int(c), Arg::Int(v)) => c.push(Some(v)),
            (Column::Int(c), Arg::OptInt(v)) => c.push(v),
            (Column::Float(c), Arg::Float(v)) => c.push(Some(v)),
            (Column::Float(c), Arg::OptFloat(v)) => c.push(v),
            (Column::Bool(c), Arg::Bool(v)) => c.push(v),
            (Column::Bytes(c), Arg::OptBytes(v)) => c.push(v),
            _ => debug_assert!(false, "a column's kind was checked"),
        }
    }
}

/// Binds a [`Column`] as one array argument, where the database has arrays.
pub(crate) trait BindColumn {
    fn add_column(&mut self, column: &Column<'_>) -> Result<(), sqlx::error::BoxDynError>;
}

impl BindColumn for PgArguments {
    fn add_column(&mut self, column: &Column<'_>) -> Result<(), sqlx::error::BoxDynError> {
        use sqlx::Arguments as _;
        match column {
            Column::Text(v) => self.add(v.as_slice()),
            Column::Int(v) => self.add(v.as_slice()),
            Column::Float(v) => self.add(v.as_slice()),
            Column::Bool(v) => self.add(v.as_slice()),
            Column::Bytes(v) => self.add(v.as_slice()),
        }
    }
}

impl BindColumn for SqliteArguments<'_> {
    /// SQLite has no arrays; its statements are written with `VALUES` instead.
    fn add_column(&mut self, _: &Column<'_>) -> Result<(), sqlx::error::BoxDynError> {
        Err("SQLite binds no arrays".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_columns_in_row_order() {
        let rows = vec![
            [Arg::Owned("a".into()), Arg::Int(1), Arg::OptBytes(None)],
            [
                Arg::OptText(None),
                Arg::OptInt(None),
                Arg::OptBytes(Some(b"z")),
            ],
        ];
        let Ok(columns) = transpose(rows) else {
            panic!("uniform rows transpose");
        };
        assert!(matches!(&columns[0], Column::Text(v) if v == &[Some(Cow::Borrowed("a")), None]));
        assert!(matches!(&columns[1], Column::Int(v) if v == &[Some(1), None]));
        assert!(matches!(&columns[2], Column::Bytes(v) if v == &[None, Some(&b"z"[..])]));
    }

    #[test]
    fn mixed_kinds_and_no_rows_are_handed_back() {
        let mixed = vec![[Arg::Int(1)], [Arg::Float(1.0)]];
        assert!(matches!(transpose(mixed), Err(rows) if rows.len() == 2));
        let none: Vec<[Arg<'_>; 1]> = Vec::new();
        assert!(transpose(none).is_err());
    }
}
