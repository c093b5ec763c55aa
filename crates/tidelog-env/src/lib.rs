//! The world a node runs in, behind two seams so that a test (or the fault-verification
//! harness) can run a whole cluster in one process:
//!
//! - [`net`]: how nodes reach each other. [`net::TcpTransport`] is the real one;
//!   [`net::MemoryNetwork`] connects in-process nodes through in-memory byte streams
//!   and can cut and heal the links between them.
//! - [`clock`]: what time it is. [`clock::SystemClock`] reads the machine's clocks;
//!   [`clock::ManualClock`] moves only when told to.
//!
//! Everything above speaks bytes over [`net::Connection`]s, so the framing, bounds and
//! timeouts of the real protocols run unchanged on either network.

pub mod clock;
pub mod net;
