//! A container's [`Bridge`] from the docker client: the name validated
//! before any docker call, then `docker inspect` and the identity lookups
//! (`crate::docker`) give the `docker exec -i … agentsight bridge` argv.

use std::ffi::OsString;

use super::client::Bridge;
use crate::docker::{ContainerName, Docker, DockerError, bridge_argv};

impl Docker {
    /// The bridge of the container `name`: the name is validated before any
    /// docker call, then its identity gives the `docker exec` argv.
    pub fn bridge(&self, name: &str) -> Result<Bridge, DockerError> {
        let name = ContainerName::parse(name)?;
        let id = self.identity(&name)?;
        let program = self.program.to_string_lossy().into_owned();
        let argv = bridge_argv(&program, &name, &id)
            .into_iter()
            .map(OsString::from)
            .collect();
        Ok(Bridge::new(name.as_str(), argv))
    }

    /// [`Docker::bridge`] started with `--allow-messaging`: only a host on
    /// which messaging is enabled asks for it, and the bridge refuses
    /// `session/message` without it.
    pub fn messaging_bridge(&self, name: &str) -> Result<Bridge, DockerError> {
        let b = self.bridge(name)?;
        let mut argv = b.argv().to_vec();
        argv.push("--allow-messaging".into());
        Ok(Bridge::new(b.container(), argv))
    }
}
