//! Builds the kernel programs (agentsight-ebpf) with aya-build so the binary
//! embeds them: one file to install.
use std::{env, fs, path::PathBuf};

fn main() -> anyhow::Result<()> {
    let out_dir =
        PathBuf::from(env::var_os("OUT_DIR").ok_or_else(|| anyhow::anyhow!("OUT_DIR not set"))?);
    let object = out_dir.join("agentsight");
    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if skip {
        // Parser-only builds: an empty object, rejected with a clear error at load time.
        if !object.exists() {
            fs::write(&object, [])?;
        }
        println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");
        return Ok(());
    }
    let manifest = env::var("CARGO_MANIFEST_DIR")?;
    let root_dir = PathBuf::from(manifest)
        .parent()
        .ok_or_else(|| anyhow::anyhow!("agentsight crate has no parent directory"))?
        .join("agentsight-ebpf");
    let root_dir = root_dir
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("non-UTF-8 path {}", root_dir.display()))?
        .to_owned();
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "agentsight-ebpf",
            root_dir: &root_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
}
