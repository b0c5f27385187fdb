//! The job-queue roles (sidekiq-bench, celery-bench, resque-bench, bullmq-bench): their flags
//! are read and checked (role_options.tsv); the producer and workers are not written yet.

use super::flags::Flags;
use super::measure::Outcome;
use super::{Context, RoleError};

pub fn run(f: &Flags, _ctx: &Context) -> Result<Outcome, RoleError> {
    Err(RoleError::Usage(format!("the {} role is not written yet (its flags are checked)", f.role)))
}
