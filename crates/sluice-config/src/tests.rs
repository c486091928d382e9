use super::*;

#[test]
fn minimal_file_loads() {
    let text = "[[listener]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";
    let config = Config::from_toml_str(text, "t.toml").expect("minimal file is valid");
    assert_eq!(config.listeners.len(), 1);
}
