//! A connection's bytes as the broker reads them: size-prefixed frames (refusing what
//! is too large), the request header, and the body of whatever API and version it
//! names, decoded by the same code the broker uses. A body that decodes must encode
//! again, and encoding what that encoding decodes to must give the same bytes.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::RequestKind;
use tidelog_protocol::frame::{read_request_frame, RequestFrame};
use tidelog_protocol::header::decode_request_header;

/// Frames larger than this are refused, as `socket.request.max.bytes` does.
const MAX_FRAME: usize = 1 << 20;
/// At most this many frames per input.
const MAX_FRAMES: usize = 64;

pub(super) fn run(data: &[u8]) {
    let mut stream = data;
    for _ in 0..MAX_FRAMES {
        let read = read_request_frame(&mut stream, MAX_FRAME, |_, _| true);
        match poll_ready(read) {
            Ok(Some(RequestFrame::Accepted(frame))) => request(frame.freeze()),
            Ok(Some(RequestFrame::Refused { .. })) => {}
            Ok(None) | Err(_) => return,
        }
    }
}

/// A frame's header and body.
fn request(mut frame: Bytes) {
    let Ok(header) = decode_request_header(&mut frame) else {
        return;
    };
    let (key, version) = (header.api_key, header.api_version);
    let Ok(body) = RequestKind::decode(key, &mut frame, version) else {
        return;
    };
    let first = encode(&body, version)
        .unwrap_or_else(|e| panic!("{key:?} v{version} decoded but does not encode: {e:#}"));
    let again = RequestKind::decode(key, &mut first.clone(), version)
        .unwrap_or_else(|e| panic!("{key:?} v{version}: its own encoding does not decode: {e:#}"));
    let second = encode(&again, version)
        .unwrap_or_else(|e| panic!("{key:?} v{version}: re-decoded body does not encode: {e:#}"));
    assert_eq!(first, second, "{key:?} v{version}: encoding is not stable");
}

fn encode(body: &RequestKind, version: i16) -> anyhow::Result<Bytes> {
    let mut out = BytesMut::new();
    body.encode(&mut out, version)?;
    Ok(out.freeze())
}

/// Runs a future that cannot wait (its reader is a byte slice) to completion.
fn poll_ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..16 {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
    panic!("reading frames from a byte slice is still pending");
}
