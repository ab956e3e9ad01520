//! A room's `queueing` method. Part of [`super::build`].

use super::build::Builder;
use super::locate::KeyPath;
use crate::store::Queueing;

/// How a room treats the visitors it would make wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueMethod {
    /// One line, first come first served (the default).
    #[default]
    Fifo,
    /// One line, a random visitor of it let in each time.
    Random,
    /// Nobody queues: newcomers get the room's "closed" answer; admitted sessions run on.
    Reject,
    /// A dry run: everyone is let in; those the line would have held are counted.
    Passthrough,
}

impl QueueMethod {
    /// What the store is told.
    pub fn store(self) -> Queueing {
        match self {
            QueueMethod::Random => Queueing::Random,
            QueueMethod::Passthrough => Queueing::Passthrough,
            QueueMethod::Reject => Queueing::Reject,
            QueueMethod::Fifo => Queueing::Fifo,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueueMethod::Fifo => "fifo",
            QueueMethod::Random => "random",
            QueueMethod::Reject => "reject",
            QueueMethod::Passthrough => "passthrough",
        }
    }
}

/// The "closed" answer's status unless configured: a page a visitor reads, not an error (and
/// kept out of caches by `no-store`).
pub const DEFAULT_CLOSED_STATUS: u16 = 200;

impl Builder<'_> {
    pub(super) fn closed_status(&mut self, p: &KeyPath, s: Option<i64>) -> u16 {
        match s {
            None => DEFAULT_CLOSED_STATUS,
            // Like `waiting-status` (found by review: 204 and 304 passed, and their answers,
            // sent with the page's length and no body, wedged the connection).
            Some(s) if super::room_parts::carries_a_page(s) => s as u16,
            Some(s) => {
                self.fail(
                    p.key("closed-status"),
                    format!("{s} is not a status that carries the closed page"),
                    "use 200 (default), 403, 410 or 503",
                );
                DEFAULT_CLOSED_STATUS
            }
        }
    }

    pub(super) fn queueing(&mut self, p: &KeyPath, q: Option<&str>) -> QueueMethod {
        match q {
            None | Some("fifo") => QueueMethod::Fifo,
            Some("random") => QueueMethod::Random,
            Some("reject") => QueueMethod::Reject,
            Some("passthrough") => QueueMethod::Passthrough,
            Some(other) => {
                self.fail(
                    p.key("queueing"),
                    format!("unknown queueing method {other:?}"),
                    "use \"fifo\" (first come, first served: the default), \"random\", \"passthrough\" or \"reject\"",
                );
                QueueMethod::Fifo
            }
        }
    }
}
