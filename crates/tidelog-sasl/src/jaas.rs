//! Kafka's `sasl.jaas.config` syntax, read as Kafka's `JaasConfig` reads it:
//!
//! ```text
//! <login module class> <flag> (<option>=<value>)* ; ...
//! ```
//!
//! Values are words (letters, digits, `.`, `_`, `-`, `$`) or quoted with `"` or `'`
//! (backslash escapes as in Java's `StreamTokenizer`); `//` and `/* */` comments and
//! any whitespace, newlines included, separate tokens. A value that starts with a
//! digit is taken as a word here (Kafka's tokenizer would read it as a number and
//! refuse it).

use std::collections::BTreeMap;

/// Kafka's login modules for the mechanisms tidelog serves.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
pub const OAUTHBEARER_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// One login module entry. Options hold passwords: `Debug` shows their names only.
#[derive(Clone, PartialEq, Eq)]
pub struct LoginModule {
    pub class: String,
    /// `required`, `requisite`, `sufficient` or `optional`, lower case.
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

impl std::fmt::Debug for LoginModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginModule")
            .field("class", &self.class)
            .field("flag", &self.flag)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl LoginModule {
    /// PLAIN's users on a broker: every `user_<name>="<password>"` option.
    pub fn plain_users(&self) -> BTreeMap<String, String> {
        self.options
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v.clone())))
            .filter(|(name, _)| !name.is_empty())
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JaasError {
    #[error("login module not specified in JAAS config")]
    Empty,
    #[error("login module control flag not specified in JAAS config")]
    NoFlag,
    #[error("invalid login module control flag '{0}' in JAAS config")]
    BadFlag(String),
    #[error("value not specified for key '{0}' in JAAS config")]
    NoValue(String),
    #[error("JAAS config entry not terminated by semi-colon")]
    Unterminated,
    #[error("unexpected '{0}' in JAAS config")]
    Unexpected(char),
    #[error("unterminated quoted value or comment in JAAS config")]
    UnterminatedQuote,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Symbol(char),
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '$') || u32::from(c) >= 0xA0
}

fn tokens(text: &str) -> Result<Vec<Token>, JaasError> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if u32::from(c) <= 32 => {}
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' || c == '\r' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut previous = ' ';
                loop {
                    match chars.next() {
                        Some('/') if previous == '*' => break,
                        Some(c) => previous = c,
                        None => return Err(JaasError::UnterminatedQuote),
                    }
                }
            }
            '"' | '\'' => out.push(Token::Word(quoted(&mut chars, c)?)),
            c if is_word_char(c) => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if !is_word_char(next) {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                out.push(Token::Word(word));
            }
            c => out.push(Token::Symbol(c)),
        }
    }
    Ok(out)
}

/// The rest of a quoted value, escapes decoded as `StreamTokenizer` decodes them.
fn quoted(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    quote: char,
) -> Result<String, JaasError> {
    let mut value = String::new();
    loop {
        match chars.next() {
            None | Some('\n') | Some('\r') => return Err(JaasError::UnterminatedQuote),
            Some(c) if c == quote => return Ok(value),
            Some('\\') => match chars.next() {
                None => return Err(JaasError::UnterminatedQuote),
                Some('n') => value.push('\n'),
                Some('t') => value.push('\t'),
                Some('r') => value.push('\r'),
                Some('b') => value.push('\u{8}'),
                Some('f') => value.push('\u{c}'),
                Some('a') => value.push('\u{7}'),
                Some('v') => value.push('\u{b}'),
                Some(d @ '0'..='7') => {
                    let mut code = d.to_digit(8).unwrap_or(0);
                    let max_digits = if d <= '3' { 2 } else { 1 };
                    for _ in 0..max_digits {
                        match chars.peek().and_then(|c| c.to_digit(8)) {
                            Some(digit) => {
                                code = code * 8 + digit;
                                chars.next();
                            }
                            None => break,
                        }
                    }
                    value.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                }
                Some(other) => value.push(other),
            },
            Some(c) => value.push(c),
        }
    }
}

/// Parses a `sasl.jaas.config` value into its login modules (at least one).
pub fn parse(text: &str) -> Result<Vec<LoginModule>, JaasError> {
    let tokens = tokens(text)?;
    let mut at = tokens.iter().peekable();
    let mut modules = Vec::new();
    while let Some(token) = at.next() {
        let class = match token {
            Token::Word(w) => w.clone(),
            Token::Symbol(c) => return Err(JaasError::Unexpected(*c)),
        };
        let flag = match at.next() {
            Some(Token::Word(w)) => w.to_ascii_lowercase(),
            Some(Token::Symbol(c)) => return Err(JaasError::BadFlag(c.to_string())),
            None => return Err(JaasError::NoFlag),
        };
        if !matches!(
            flag.as_str(),
            "required" | "requisite" | "sufficient" | "optional"
        ) {
            return Err(JaasError::BadFlag(flag));
        }
        let mut options = BTreeMap::new();
        loop {
            match at.next() {
                Some(Token::Symbol(';')) => break,
                Some(Token::Word(key)) => match (at.next(), at.next()) {
                    (Some(Token::Symbol('=')), Some(Token::Word(value))) => {
                        options.insert(key.clone(), value.clone());
                    }
                    _ => return Err(JaasError::NoValue(key.clone())),
                },
                Some(Token::Symbol(c)) => return Err(JaasError::Unexpected(*c)),
                None => return Err(JaasError::Unterminated),
            }
        }
        modules.push(LoginModule {
            class,
            flag,
            options,
        });
    }
    if modules.is_empty() {
        return Err(JaasError::Empty);
    }
    Ok(modules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_broker_plain_example() {
        let text = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;
        let modules = parse(text).unwrap();
        assert_eq!(modules.len(), 1);
        let m = &modules[0];
        assert_eq!(m.class, PLAIN_LOGIN_MODULE);
        assert_eq!(m.flag, "required");
        assert_eq!(m.options["username"], "admin");
        let users = m.plain_users();
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "alice-secret");
        assert!(!format!("{m:?}").contains("secret"));
    }

    #[test]
    fn layout_quotes_escapes_and_comments() {
        let text = "  // users of the external listener\n org.apache.kafka.common.security.scram.ScramLoginModule\n  REQUIRED /* flag */\n\tusername=bob password='it\\'s' user_x=\"a\\\"b\\\\c\\n\\101\" plain=some.word-with_$ digits=2024abc ;\n other.Module optional ;";
        let modules = parse(text).unwrap();
        assert_eq!(modules.len(), 2);
        let m = &modules[0];
        assert_eq!(m.flag, "required");
        assert_eq!(m.options["username"], "bob");
        assert_eq!(m.options["password"], "it's");
        assert_eq!(m.options["user_x"], "a\"b\\c\nA");
        assert_eq!(m.options["plain"], "some.word-with_$");
        assert_eq!(m.options["digits"], "2024abc");
        assert!(modules[1].options.is_empty());
    }

    #[test]
    fn refused_configs() {
        let cases = [
            ("", JaasError::Empty),
            ("   // nothing\n", JaasError::Empty),
            ("Module", JaasError::NoFlag),
            ("Module maybe;", JaasError::BadFlag("maybe".into())),
            ("Module required a=b", JaasError::Unterminated),
            ("Module required a=;", JaasError::NoValue("a".into())),
            ("Module required a;", JaasError::NoValue("a".into())),
            ("Module required a=\"open;", JaasError::UnterminatedQuote),
            ("Module required a=b, c=d;", JaasError::Unexpected(',')),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), Err(expected), "{text:?}");
        }
    }
}
