//! A one-line progress report on stderr for work that takes seconds, shown only when
//! stderr is a terminal: in a pipe or a log file a line rewritten with `\r` is noise.

use std::io::{IsTerminal, Write};

pub(crate) struct Progress {
    enabled: bool,
    shown: bool,
}

impl Progress {
    pub(crate) fn new() -> Progress {
        Progress {
            enabled: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    /// Replaces the line with `text`.
    pub(crate) fn show(&mut self, text: &str) {
        if self.enabled {
            let mut err = std::io::stderr().lock();
            // Nothing to do about a failed write to the terminal but go on.
            let _ = write!(err, "\r\x1b[2K{text}");
            let _ = err.flush();
            self.shown = true;
        }
    }

    /// Clears the line, so the result starts on a clean one.
    pub(crate) fn finish(&mut self) {
        if self.shown {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
            self.shown = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
