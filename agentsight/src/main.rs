fn main() {
    std::process::exit(agentsight::cli::main());
}
