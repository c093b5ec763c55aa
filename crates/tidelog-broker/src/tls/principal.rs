//! The principal of a TLS client, as Kafka derives it: the subject of the client
//! certificate as an RFC 2253 distinguished name (Java's `X500Principal.getName()`,
//! e.g. `CN=client,O=Example`), mapped by `ssl.principal.mapping.rules`, as
//! `User:<name>`; `User:ANONYMOUS` without a certificate.

use regex_automata::meta::Regex;

/// `ssl.principal.mapping.rules`: tried in order, the first that matches wins.
pub(crate) struct PrincipalRules(Vec<Rule>);

enum Rule {
    /// The distinguished name as it is.
    Default,
    /// `RULE:pattern/replacement/[LU]`: when `pattern` matches the whole name, the
    /// replacement with `$n` groups filled in, optionally lower or upper cased.
    Replace {
        pattern: Regex,
        replacement: String,
        case: Option<char>,
    },
}

impl PrincipalRules {
    pub(crate) fn parse(text: &str) -> Result<PrincipalRules, String> {
        let mut rules = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) = until_slash(after)
                    .ok_or("a RULE is RULE:pattern/replacement/ with an optional L or U")?;
                let (replacement, after) = until_slash(after)
                    .ok_or("a RULE is RULE:pattern/replacement/ with an optional L or U")?;
                let (case, after) = match after.chars().next() {
                    Some(c @ ('L' | 'U')) => (Some(c), &after[1..]),
                    _ => (None, after),
                };
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| format!("bad pattern `{pattern}`: {e}"))?;
                rules.push(Rule::Replace {
                    pattern,
                    replacement,
                    case,
                });
                rest = after;
            } else {
                return Err(format!("`{rest}` is neither DEFAULT nor RULE:..."));
            }
            rest = rest.trim_start();
            rest = match rest.strip_prefix(',') {
                Some(after) => after.trim_start(),
                None if rest.is_empty() => rest,
                None => return Err(format!("expected a comma before `{rest}`")),
            };
        }
        if rules.is_empty() {
            rules.push(Rule::Default);
        }
        Ok(PrincipalRules(rules))
    }

    /// The short name of `dn`, or `None` when no rule applies (Kafka refuses such a
    /// client).
    pub(crate) fn apply(&self, dn: &str) -> Option<String> {
        self.0.iter().find_map(|rule| match rule {
            Rule::Default => Some(dn.to_string()),
            Rule::Replace {
                pattern,
                replacement,
                case,
            } => {
                let mut caps = pattern.create_captures();
                pattern.captures(dn, &mut caps);
                if !caps.is_match() {
                    return None;
                }
                let mut out = String::new();
                let mut chars = replacement.chars().peekable();
                while let Some(c) = chars.next() {
                    match c {
                        '$' if chars.peek().is_some_and(char::is_ascii_digit) => {
                            let group = chars.next().and_then(|d| d.to_digit(10)).unwrap_or(0);
                            if let Some(span) = caps.get_group(group as usize) {
                                out.push_str(&dn[span.range()]);
                            }
                        }
                        '\\' => out.extend(chars.next()),
                        c => out.push(c),
                    }
                }
                Some(match case {
                    Some('L') => out.to_lowercase(),
                    Some('U') => out.to_uppercase(),
                    _ => out,
                })
            }
        })
    }
}

/// Text up to the next `/` not escaped as `\/`, and what follows that slash.
fn until_slash(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if text[i + 1..].starts_with('/') => {
                out.push('/');
                chars.next();
            }
            '/' => return Some((out, &text[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// The `User:...` principal of a connection whose client presented `cert` (DER), or
/// ANONYMOUS without one. An unreadable certificate or a name no rule maps is an
/// error, and the connection is closed.
pub(crate) fn client_principal(
    cert: Option<&[u8]>,
    rules: &PrincipalRules,
) -> Result<String, String> {
    let Some(der) = cert else {
        return Ok("User:ANONYMOUS".to_string());
    };
    let dn = subject_dn(der)?;
    let name = rules
        .apply(&dn)
        .ok_or_else(|| format!("no ssl.principal.mapping.rules rule applies to {dn}"))?;
    Ok(format!("User:{name}"))
}

/// The certificate's subject in RFC 2253 form: the last RDN first, attributes by
/// their short names, special characters escaped.
pub(crate) fn subject_dn(der: &[u8]) -> Result<String, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("unreadable client certificate: {e}"))?;
    let rdns: Vec<String> = cert
        .subject()
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|attr| {
                    let oid = attr.attr_type().to_id_string();
                    match (short_name(&oid), attr.as_str()) {
                        (Some(name), Ok(value)) => format!("{name}={}", escape(value)),
                        // As Java does for types without a keyword or values that are
                        // not strings: the dotted OID and the value's DER in hex.
                        _ => format!("{oid}=#{}", der_hex(attr.attr_value())),
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

/// The keywords Java's RFC 2253 output uses.
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

fn escape(value: &str) -> String {
    let mut out = String::new();
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn der_hex(value: &x509_parser::asn1_rs::Any<'_>) -> String {
    let mut der = vec![value.tag().0 as u8];
    let len = value.data.len();
    if len < 0x80 {
        der.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        der.push(0x80 | bytes.len() as u8);
        der.extend(bytes);
    }
    der.extend_from_slice(value.data);
    der.iter().map(|b| format!("{b:02x}")).collect()
}
