//! Java `.properties` files, read as `java.util.Properties.load` reads them, so a Kafka
//! `server.properties` means the same here: `#` and `!` comments, `key=value`,
//! `key: value` or `key value`, backslash escapes (`\t`, `\n`, `\uXXXX`, `\=`, ...), and a
//! line ending in an odd number of backslashes continued on the next (whose leading
//! blanks are dropped). The file is read as UTF-8, which Kafka's ISO-8859-1 reading agrees
//! with for the ASCII every Kafka setting uses.

/// One `key=value` of a file, with the line it starts on (for error messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    pub key: String,
    pub value: String,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct PropertiesError {
    pub line: usize,
    pub reason: &'static str,
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Every property of `text`, in file order (a later duplicate wins when applied).
pub fn parse(text: &str) -> Result<Vec<Property>, PropertiesError> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((line, natural)) = lines.next() {
        let first = natural.trim_start_matches(is_blank);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = String::from(first);
        while ends_in_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(is_blank)),
                None => break,
            }
        }
        let (key, value) = split_key(&logical);
        out.push(Property {
            key: unescape(key).map_err(|reason| PropertiesError { line, reason })?,
            value: unescape(value).map_err(|reason| PropertiesError { line, reason })?,
            line,
        });
    }
    Ok(out)
}

/// An odd run of trailing backslashes: the last one escapes the line break.
fn ends_in_continuation(line: &str) -> bool {
    line.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1
}

/// The raw key and raw value of a logical line: the key ends at the first unescaped
/// `=`, `:` or blank; blanks and at most one `=`/`:` separate it from the value.
fn split_key(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut end = line.len();
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_blank(c) {
            end = i;
            break;
        }
    }
    let key = &line[..end];
    let mut rest = line[end..].trim_start_matches(is_blank);
    if let Some(after) = rest.strip_prefix(['=', ':']) {
        rest = after.trim_start_matches(is_blank);
    }
    (key, rest)
}

fn unescape(raw: &str) -> Result<String, &'static str> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or("malformed \\uXXXX escape")?;
                out.push(char::from_u32(code).ok_or("\\u escape is not a character")?);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect()
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn separators_comments_and_blanks_as_java_reads_them() {
        let text = "# comment\n  ! another\n\nnode.id=1\nlog.dirs : /var/lib/kafka\n\
                    num.partitions 3\n  spaced.key   =   spaced value  \nempty=\nbare\n";
        assert_eq!(
            pairs(text),
            [
                kv("node.id", "1"),
                kv("log.dirs", "/var/lib/kafka"),
                kv("num.partitions", "3"),
                kv("spaced.key", "spaced value  "),
                kv("empty", ""),
                kv("bare", ""),
            ]
        );
    }

    #[test]
    fn continuation_lines_join_and_lose_their_leading_blanks() {
        let text = "listeners=PLAINTEXT://:9092,\\\n    CONTROLLER://:9093\nnext=1\n";
        assert_eq!(
            pairs(text),
            [
                kv("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"),
                kv("next", "1")
            ]
        );
        // An even run of backslashes is an escaped backslash, not a continuation.
        assert_eq!(
            pairs("path=C:\\\\\nx=1"),
            [kv("path", "C:\\"), kv("x", "1")]
        );
        // A continuation at the end of the file ends the value.
        assert_eq!(pairs("a=b\\"), [kv("a", "b")]);
    }

    #[test]
    fn escapes_in_keys_and_values() {
        assert_eq!(
            pairs("a\\=b=c\\:d\\te\\u00e9\\q\n"),
            [kv("a=b", "c:d\te\u{e9}q")]
        );
        assert_eq!(pairs("a\\ b=1"), [kv("a b", "1")]);
        let bad = parse("ok=1\nbad=\\u12\n").unwrap_err();
        assert_eq!(bad.line, 2);
    }

    #[test]
    fn windows_line_endings_and_line_numbers() {
        let parsed = parse("a=1\r\n# c\r\nb=2\r\n").unwrap();
        assert_eq!(
            parsed,
            [
                Property {
                    key: "a".into(),
                    value: "1".into(),
                    line: 1
                },
                Property {
                    key: "b".into(),
                    value: "2".into(),
                    line: 3
                },
            ]
        );
    }
}
