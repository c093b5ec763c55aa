//! Whether this kernel offers kernel TLS (kTLS), probed once at start-up and logged.
//!
//! With kTLS a TLS connection's record encryption moves into the kernel (the `tls`
//! upper-layer protocol, `setsockopt(TCP_ULP, "tls")`, then the session's keys with
//! `SOL_TLS`/`TLS_TX`), so a fetch over TLS could again go out with `sendfile(2)`.
//! tidelog does not use it yet (see docs/performance.md, "TLS"): this probe tells an
//! operator whether the kernel would allow it. It attaches the ULP to a connected
//! loopback socket and closes it; nothing else is done with the socket.
//!
//! The one `unsafe` here is the `libc::setsockopt` call (rustix has no TCP_ULP).
#![allow(unsafe_code)]

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

/// Attaches the `tls` ULP to a connected loopback TCP socket. `Ok`: the kernel has
/// kTLS (the `tls` module is built in or loaded); the error says why not.
pub(crate) fn probe() -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    let (_server, _) = listener.accept()?;
    let name = b"tls";
    // SAFETY: `client` is an open socket for the duration of the call; the option
    // value is a valid buffer of the length given.
    let result = unsafe {
        libc::setsockopt(
            client.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_ULP,
            name.as_ptr().cast(),
            libc::socklen_t::try_from(name.len()).unwrap_or(3),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Runs [`probe`] on a blocking thread and logs the finding once.
pub(crate) async fn log_availability() {
    let found = tokio::task::spawn_blocking(probe).await;
    let ulps = tokio::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
        .await
        .unwrap_or_default();
    let ulps = ulps.trim();
    match found {
        Ok(Ok(())) => tracing::info!(available_ulps = ulps, "kernel TLS (kTLS) is available on this kernel; tidelog does not use it yet, so fetches over TLS are encrypted in this process without sendfile"),
        Ok(Err(e)) => tracing::info!(available_ulps = ulps, error = %e, "kernel TLS (kTLS) is not available on this kernel (setsockopt TCP_ULP \"tls\" refused); fetches over TLS are encrypted in this process without sendfile"),
        Err(e) => tracing::debug!(error = %e, "the kTLS probe did not run"),
    }
}

#[cfg(test)]
mod tests {
    /// The probe answers either way without failing the caller; on this project's
    /// machines (no `tls` ULP) it is an error, which must name the cause.
    #[test]
    fn the_probe_answers() {
        let ulps =
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp").unwrap_or_default();
        match super::probe() {
            Ok(()) => assert!(ulps.contains("tls") || ulps.is_empty(), "{ulps}"),
            Err(e) => assert!(e.raw_os_error().is_some(), "{e}"),
        }
    }
}
