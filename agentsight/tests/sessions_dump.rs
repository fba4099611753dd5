//! Developer aid: `DUMP=provider:relpath cargo test --test sessions_dump -- --ignored --nocapture`
//! prints a parsed fixture as JSON.
mod sessions_common;
use agentsight::sessions::Provider;
#[test]
#[ignore]
fn dump() {
    let Ok(spec) = std::env::var("DUMP") else {
        return;
    };
    let Some((p, f)) = spec.split_once(':') else {
        return;
    };
    let p: Provider = p.parse().expect("provider");
    let s = sessions_common::parse(p, f);
    println!("{}", serde_json::to_string_pretty(&s).expect("json"));
}
