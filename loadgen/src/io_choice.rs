//! `--io auto|io_uring|epoll` (a redline-only flag): the I/O path asked for. Its own module, so
//! that the command line (cli.rs) names it without depending on the I/O paths themselves
//! (iopath/, which depend on net.rs, which reads the command line's Config).

/// `--io`: which I/O path to use.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Choice {
    /// io_uring where the kernel allows it, else epoll.
    Auto,
    IoUring,
    Epoll,
}

impl Choice {
    pub fn parse(text: &str) -> Option<Choice> {
        match text {
            "auto" => Some(Choice::Auto),
            "io_uring" => Some(Choice::IoUring),
            "epoll" => Some(Choice::Epoll),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Choice::Auto => "auto",
            Choice::IoUring => "io_uring",
            Choice::Epoll => "epoll",
        }
    }
}
