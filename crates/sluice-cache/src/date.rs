//! HTTP-date (RFC 9110 §5.6.7): parsing the three formats a recipient must accept, and writing
//! the one a sender must use.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];
const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];

/// Parses an HTTP-date in IMF-fixdate, obsolete RFC 850 or asctime form; `None` when the value
/// is none of them (callers treat that per the field's rule, e.g. an invalid Expires means
/// "already expired", RFC 9111 §5.3). The day name is not checked against the date.
pub fn parse_http_date(value: &[u8]) -> Option<SystemTime> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let (day, month, year, clock) = if let Some((_, rest)) = text.split_once(", ") {
        let parts: Vec<&str> = rest.split(' ').collect();
        match parts.as_slice() {
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            [day, month, year, clock, "GMT"] => (*day, *month, parse_u64(year)?, *clock),
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            [date, clock, "GMT"] => {
                let mut fields = date.split('-');
                let (day, month, year) = (fields.next()?, fields.next()?, fields.next()?);
                let year = parse_u64(year)?;
                // RFC 9110 §5.6.7: a two-digit year more than 50 years ahead is in the past.
                let year = if year < 70 { 2000 + year } else { 1900 + year };
                (day, month, year, *clock)
            }
            _ => return None,
        }
    } else {
        // asctime: Sun Nov  6 08:49:37 1994
        let parts: Vec<&str> = text.split(' ').filter(|p| !p.is_empty()).collect();
        match parts.as_slice() {
            [_, month, day, clock, year] => (*day, *month, parse_u64(year)?, *clock),
            _ => return None,
        }
    };
    let day = parse_u64(day)?;
    let month = MONTHS
        .iter()
        .position(|m| m.as_slice() == month.as_bytes())? as u64
        + 1;
    let mut hms = clock.split(':');
    let (h, m, s) = (hms.next()?, hms.next()?, hms.next()?);
    let (h, m, s) = (parse_u64(h)?, parse_u64(m)?, parse_u64(s)?);
    if hms.next().is_some() || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    if year < 1970 {
        return Some(UNIX_EPOCH);
    }
    let days = days_from_civil(year, month, day)?;
    let secs = days
        .checked_mul(86_400)?
        .checked_add(h * 3600 + m * 60 + s)?;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// Writes `time` as an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`; times before 1970 are
/// written as the epoch.
pub fn format_http_date(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let days = secs / 86_400;
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let weekday = DAYS[(days % 7) as usize];
    let month = std::str::from_utf8(MONTHS[(month - 1) as usize]).unwrap_or("Jan");
    format!(
        "{weekday}, {day:02} {month} {year} {:02}:{:02}:{:02} GMT",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

fn parse_u64(digits: &str) -> Option<u64> {
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    (era * 146_097 + day_of_era).checked_sub(719_468)
}

/// The inverse of [`days_from_civil`]: (year, month 1-12, day 1-31).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUNDAY: u64 = 784_111_777; // 1994-11-06 08:49:37 UTC, RFC 9110's example.

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn parses_imf_fixdate() {
        assert_eq!(
            parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(at(SUNDAY))
        );
    }

    #[test]
    fn parses_rfc850_date() {
        assert_eq!(
            parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(at(SUNDAY))
        );
    }

    #[test]
    fn parses_asctime_date() {
        assert_eq!(
            parse_http_date(b"Sun Nov  6 08:49:37 1994"),
            Some(at(SUNDAY))
        );
    }

    #[test]
    fn rejects_invalid_dates() {
        for bad in [
            &b""[..],
            b"0",
            b"-1",
            b"Sun, 06 Nov 1994 08:49:37 UTC",
            b"Sun, 32 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn formats_imf_fixdate_round_trip() {
        assert_eq!(
            format_http_date(at(SUNDAY)),
            "Sun, 06 Nov 1994 08:49:37 GMT"
        );
        let leap = at(951_782_400); // 2000-02-29
        assert_eq!(
            parse_http_date(format_http_date(leap).as_bytes()),
            Some(leap)
        );
    }
}
