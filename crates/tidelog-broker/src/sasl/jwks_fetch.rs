//! Reads the JWKS that `sasl.oauthbearer.jwks.endpoint.url` names: a `file://` path,
//! or an `http://` / `https://` URL fetched with a minimal HTTP/1.0 GET (one request,
//! no redirects, no chunked bodies: HTTP/1.0 responses are never chunked), bounded in
//! size and time. HTTPS trusts the system's CA bundle. A key set is public data, but
//! nothing read here is logged.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest key set read (identity providers publish a few keys: a few KiB).
const MAX_JWKS_BYTES: u64 = 1024 * 1024;
/// Room for the status line and headers of an HTTP answer.
const MAX_HEADER_BYTES: u64 = 16 * 1024;
/// The whole fetch: connect, TLS, request and answer.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Where Debian (and most Linux distributions) keep the system's CA certificates.
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Where a key set is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JwksSource {
    File(PathBuf),
    Http(HttpUrl),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpUrl {
    tls: bool,
    host: String,
    port: u16,
    /// The path and query, starting with `/`.
    target: String,
}

impl JwksSource {
    /// Reads the URL; the error says what is wrong with it.
    pub(crate) fn parse(url: &str) -> Result<JwksSource, String> {
        let url = url.trim();
        if let Some(path) = url.strip_prefix("file://") {
            // file:///path (an empty authority) or file://localhost/path.
            let path = path.strip_prefix("localhost").unwrap_or(path);
            if !path.starts_with('/') {
                return Err(format!(
                    "`{url}`: a file URL names an absolute path (file:///path/jwks.json)"
                ));
            }
            return Ok(JwksSource::File(PathBuf::from(path)));
        }
        let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!("`{url}` is not a file://, http:// or https:// URL"));
        };
        let (authority, target) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        let target = if target.starts_with('?') {
            format!("/{target}")
        } else {
            target
        };
        if authority.contains('@') {
            return Err(format!("`{url}`: credentials in the URL are not sent"));
        }
        let default_port = if tls { 443 } else { 80 };
        let (host, port) = split_host_port(authority, default_port)
            .ok_or_else(|| format!("`{url}`: cannot read the host and port"))?;
        if target.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(format!(
                "`{url}`: the path has spaces or control characters"
            ));
        }
        Ok(JwksSource::Http(HttpUrl {
            tls,
            host,
            port,
            target,
        }))
    }

    /// The key set's bytes.
    pub(crate) async fn read(&self) -> Result<Vec<u8>, String> {
        match self {
            JwksSource::File(path) => read_file(path).await,
            JwksSource::Http(url) => tokio::time::timeout(FETCH_TIMEOUT, fetch(url))
                .await
                .map_err(|_| format!("no answer within {FETCH_TIMEOUT:?}"))?,
        }
    }
}

fn split_host_port(authority: &str, default_port: u16) -> Option<(String, u16)> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default_port,
    };
    (!host.is_empty()).then(|| (host.to_string(), port))
}

async fn read_file(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let len = tokio::fs::metadata(path)
        .await
        .map_err(|e| format!("{shown}: {e}"))?
        .len();
    if len > MAX_JWKS_BYTES {
        return Err(format!("{shown} is larger than {MAX_JWKS_BYTES} bytes"));
    }
    tokio::fs::read(path)
        .await
        .map_err(|e| format!("{shown}: {e}"))
}

async fn fetch(url: &HttpUrl) -> Result<Vec<u8>, String> {
    let tcp = TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|e| format!("connecting to {}:{}: {e}", url.host, url.port))?;
    if !url.tls {
        return get(tcp, url).await;
    }
    let connector = tokio_rustls::TlsConnector::from(https_client().await?);
    let name = ServerName::try_from(url.host.clone()).map_err(|e| e.to_string())?;
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS with {}: {e}", url.host))?;
    get(tls, url).await
}

/// One GET, read to the end of the connection (HTTP/1.0: the server closes it).
async fn get(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    url: &HttpUrl,
) -> Result<Vec<u8>, String> {
    let host = if url.host.contains(':') {
        format!("[{}]", url.host)
    } else {
        url.host.clone()
    };
    let request = format!(
        "GET {} HTTP/1.0\r\nHost: {host}:{}\r\nAccept: application/json\r\nUser-Agent: tidelog\r\nConnection: close\r\n\r\n",
        url.target, url.port
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let limit = MAX_JWKS_BYTES + MAX_HEADER_BYTES;
    (&mut stream)
        .take(limit + 1)
        .read_to_end(&mut answer)
        .await
        .map_err(|e| e.to_string())?;
    if answer.len() as u64 > limit {
        return Err(format!("the answer is larger than {limit} bytes"));
    }
    body_of(&answer).map(<[u8]>::to_vec)
}

/// The body of a complete HTTP answer with status 200.
fn body_of(answer: &[u8]) -> Result<&[u8], String> {
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("the answer has no end of headers")?;
    let head = std::str::from_utf8(&answer[..end]).map_err(|_| "the headers are not text")?;
    let body = &answer[end + 4..];
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let code = status.split(' ').nth(1).unwrap_or_default();
    if !status.starts_with("HTTP/1.") || code != "200" {
        return Err(format!("the answer's status is not 200: {status}"));
    }
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("transfer-encoding") && !value.eq_ignore_ascii_case("identity")
        {
            return Err(format!("unexpected transfer-encoding {value}"));
        }
        if name.eq_ignore_ascii_case("content-length") {
            let len: usize = value.parse().map_err(|_| "a bad content-length")?;
            return body
                .get(..len)
                .ok_or_else(|| "the body is shorter than its content-length".to_string());
        }
    }
    Ok(body)
}

/// The TLS client for https key sets: the system's CAs, read once, on a blocking thread.
async fn https_client() -> Result<Arc<rustls::ClientConfig>, String> {
    static CLIENT: tokio::sync::OnceCell<Arc<rustls::ClientConfig>> =
        tokio::sync::OnceCell::const_new();
    CLIENT
        .get_or_try_init(|| async {
            let pem = tokio::task::spawn_blocking(|| std::fs::read(SYSTEM_CA_BUNDLE))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("{SYSTEM_CA_BUNDLE}: {e}"))?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem).flatten() {
                // A CA the platform lists but webpki cannot read is simply not trusted.
                let _ = roots.add(cert);
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .await
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            JwksSource::parse("file:///etc/idp/jwks.json"),
            Ok(JwksSource::File(PathBuf::from("/etc/idp/jwks.json")))
        );
        assert_eq!(
            JwksSource::parse("https://idp.example/oauth2/v1/keys?x=1"),
            Ok(JwksSource::Http(HttpUrl {
                tls: true,
                host: "idp.example".into(),
                port: 443,
                target: "/oauth2/v1/keys?x=1".into(),
            }))
        );
        assert_eq!(
            JwksSource::parse("http://[::1]:8080"),
            Ok(JwksSource::Http(HttpUrl {
                tls: false,
                host: "::1".into(),
                port: 8080,
                target: "/".into(),
            }))
        );
        for bad in [
            "ftp://x/jwks",
            "file://relative/jwks",
            "http://:80/",
            "http://u:p@h/",
            "http://h:99999/",
        ] {
            assert!(JwksSource::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn answers() {
        assert_eq!(
            body_of(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}xx"),
            Ok(&b"{}"[..])
        );
        assert_eq!(body_of(b"HTTP/1.0 200 OK\r\n\r\n{}"), Ok(&b"{}"[..]));
        assert!(body_of(b"HTTP/1.1 404 Not Found\r\n\r\n").is_err());
        assert!(body_of(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}").is_err());
        assert!(body_of(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
        assert!(body_of(b"HTTP/1.1 200 OK").is_err());
    }

    /// A key set served over HTTP by a listener on loopback.
    #[tokio::test]
    async fn fetches_over_http() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 1024];
            let n = socket.read(&mut request).await.unwrap();
            socket
                .write_all(
                    b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"keys\":[]}",
                )
                .await
                .unwrap();
            String::from_utf8_lossy(&request[..n]).to_string()
        });
        let source = JwksSource::parse(&format!("http://127.0.0.1:{port}/jwks")).unwrap();
        assert_eq!(source.read().await.unwrap(), b"{\"keys\":[]}");
        let request = server.await.unwrap();
        assert!(request.starts_with("GET /jwks HTTP/1.0\r\n"), "{request}");
    }

    /// HTTPS verifies the server against the system's CAs: a self-signed identity
    /// provider is refused (and says why), not read.
    #[tokio::test]
    async fn https_refuses_a_certificate_no_system_ca_signed() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls_pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            let _ = acceptor.accept(socket).await;
        });
        let source = JwksSource::parse(&format!("https://localhost:{port}/jwks")).unwrap();
        let refused = source.read().await.unwrap_err();
        // (A machine without the CA bundle refuses for that reason instead.)
        assert!(
            refused.contains("TLS with localhost") || refused.contains(SYSTEM_CA_BUNDLE),
            "{refused}"
        );
        assert!(refused.to_lowercase().contains("certificate"), "{refused}");
    }
}
