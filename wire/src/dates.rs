/// The proleptic Gregorian (year, month, day) of a day counted from 1970-01-01
/// (Howard Hinnant's civil-from-days algorithm). Shared by the dashboard's
/// timestamps and the server's daily OTLP run ids, so both name a day alike.
pub fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// The inverse of [`civil_date`]: days from 1970-01-01 to a (year, month, day).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::{civil_date, days_from_civil};

    #[test]
    fn calendar_dates_become_days_and_back() {
        for days in [-1, 0, 11_016, 20_786, 401_767] {
            let (y, m, d) = civil_date(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn days_become_calendar_dates() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(-1), (1969, 12, 31));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(20_786), (2026, 11, 29));
    }
}
