use super::Invalid;

/// Checks a run, trace or span id: 1–64 of `[A-Za-z0-9._-]`, starting with a letter
/// or digit. `field` names it in the error.
pub fn check_id(value: &str, field: &str) -> Result<(), Invalid> {
    let ok = (1..=64).contains(&value.len())
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(Invalid::new(
            "invalid_id",
            format!(
                "{field} {value:?} must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"
            ),
        ))
    }
}

/// Like [`check_id`], and `steps` is reserved by the URL scheme.
pub fn check_trace_id(value: &str, field: &str) -> Result<(), Invalid> {
    check_id(value, field)?;
    if value == "steps" {
        return Err(Invalid::new(
            "invalid_id",
            format!("{field} \"steps\" is reserved"),
        ));
    }
    Ok(())
}

pub fn check_project(value: &str) -> Result<(), Invalid> {
    let len = value.chars().count();
    if len == 0 || len > 128 || value.chars().any(char::is_control) {
        return Err(Invalid::new(
            "invalid_project",
            "project must be 1-128 characters with no control characters",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_contract() {
        assert!(check_id("4bf92f3577b34da6a3ce929d0e0e4736", "trace_id").is_ok());
        assert!(check_id("run.2026-11_a", "run_id").is_ok());
        assert!(check_id("", "run_id").is_err());
        assert!(check_id("-lead", "run_id").is_err());
        assert!(check_id("has space", "run_id").is_err());
        assert!(check_id(&"a".repeat(65), "run_id").is_err());
        let err = check_trace_id("steps", "trace_id").unwrap_err();
        assert!(err.message.contains("trace_id"));
        assert!(check_project("cartpole").is_ok());
        assert!(check_project("bad\nname").is_err());
    }
}
