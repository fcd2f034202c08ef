//! Helpers shared by the integration tests.

pub mod mariadb;
pub mod sim;
pub mod truth;
