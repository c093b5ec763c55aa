//! `tidelog consume --format`: `%k` key, `%v` value, `%p` partition, `%o` offset,
//! `%t` timestamp (ms), `%h` headers (`k=v,k2=v2`), `%%` a percent sign; `\n`, `\t`, `\\`
//! escapes. Each record's output ends with a newline. Null keys/values print as nothing.

use tidelog_client::ConsumedRecord;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(Vec<u8>),
    Key,
    Value,
    Partition,
    Offset,
    Timestamp,
    Headers,
}

/// A parsed format string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordFormat {
    tokens: Vec<Token>,
}

impl RecordFormat {
    /// Parses a format; unknown `%x` or `\x` sequences are errors so typos show at once.
    pub(crate) fn parse(format: &str) -> Result<RecordFormat, String> {
        let mut tokens = Vec::new();
        let mut literal = Vec::new();
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            let token = match c {
                '%' => match chars.next() {
                    Some('k') => Token::Key,
                    Some('v') => Token::Value,
                    Some('p') => Token::Partition,
                    Some('o') => Token::Offset,
                    Some('t') => Token::Timestamp,
                    Some('h') => Token::Headers,
                    Some('%') => {
                        literal.push(b'%');
                        continue;
                    }
                    Some(other) => {
                        return Err(format!(
                            "unknown format token %{other} (use %k %v %p %o %t %h %%)"
                        ))
                    }
                    None => return Err("format ends with a lone %".into()),
                },
                '\\' => {
                    let escaped = match chars.next() {
                        Some('n') => b'\n',
                        Some('t') => b'\t',
                        Some('\\') => b'\\',
                        Some(other) => {
                            return Err(format!("unknown escape \\{other} (use \\n \\t \\\\)"))
                        }
                        None => return Err("format ends with a lone \\".into()),
                    };
                    literal.push(escaped);
                    continue;
                }
                other => {
                    let mut buf = [0u8; 4];
                    literal.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                    continue;
                }
            };
            if !literal.is_empty() {
                tokens.push(Token::Literal(std::mem::take(&mut literal)));
            }
            tokens.push(token);
        }
        literal.push(b'\n');
        tokens.push(Token::Literal(literal));
        Ok(RecordFormat { tokens })
    }

    /// Appends the formatted record (bytes of keys and values are written as they are).
    pub(crate) fn write(&self, record: &ConsumedRecord, out: &mut Vec<u8>) {
        for token in &self.tokens {
            match token {
                Token::Literal(bytes) => out.extend_from_slice(bytes),
                Token::Key => out.extend_from_slice(record.key.as_deref().unwrap_or_default()),
                Token::Value => out.extend_from_slice(record.value.as_deref().unwrap_or_default()),
                Token::Partition => out.extend_from_slice(record.partition.to_string().as_bytes()),
                Token::Offset => out.extend_from_slice(record.offset.to_string().as_bytes()),
                Token::Timestamp => out.extend_from_slice(record.timestamp.to_string().as_bytes()),
                Token::Headers => {
                    for (i, (k, v)) in record.headers.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(k.as_bytes());
                        if let Some(v) = v {
                            out.push(b'=');
                            out.extend_from_slice(v);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn record() -> ConsumedRecord {
        ConsumedRecord {
            partition: 3,
            offset: 42,
            timestamp: 1_700_000_000_123,
            log_append_time: false,
            key: Some(Bytes::from_static(b"k1")),
            value: Some(Bytes::from_static(b"hello \xff world")),
            headers: vec![
                ("a".into(), Some(Bytes::from_static(b"1"))),
                ("b".into(), None),
            ],
            producer_id: -1,
        }
    }

    fn render(format: &str, r: &ConsumedRecord) -> Vec<u8> {
        let mut out = Vec::new();
        RecordFormat::parse(format).unwrap().write(r, &mut out);
        out
    }

    #[test]
    fn default_format_is_the_value_and_a_newline() {
        assert_eq!(render("%v", &record()), b"hello \xff world\n");
    }

    #[test]
    fn every_token_renders() {
        assert_eq!(
            render("%p:%o@%t %k=%v [%h] 100%%", &record()),
            b"3:42@1700000000123 k1=hello \xff world [a=1,b] 100%\n".to_vec()
        );
    }

    #[test]
    fn escapes_and_unicode_literals() {
        assert_eq!(
            render("%k\\t→\\\\%o\\n", &record()),
            "k1\t→\\42\n\n".as_bytes()
        );
    }

    #[test]
    fn null_key_and_value_print_nothing() {
        let mut r = record();
        r.key = None;
        r.value = None;
        r.headers.clear();
        assert_eq!(render("[%k][%v][%h]", &r), b"[][][]\n");
    }

    #[test]
    fn bad_formats_are_rejected() {
        assert!(RecordFormat::parse("%x").is_err());
        assert!(RecordFormat::parse("abc%").is_err());
        assert!(RecordFormat::parse("\\q").is_err());
        assert!(RecordFormat::parse("trailing\\").is_err());
    }
}
