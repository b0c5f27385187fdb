use super::flags::Flags;
use super::measure::Outcome;
use super::{Context, RoleError};
pub fn run(_f: &Flags, _ctx: &Context) -> Result<Outcome, RoleError> {
    Err(RoleError::Usage("not yet".into()))
}
