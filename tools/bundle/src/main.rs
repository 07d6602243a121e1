//! `treeline-bundle WASM OUT_DIR NAME`: writes `NAME.js` and `NAME_bg.wasm` in
//! OUT_DIR for the browser, as `wasm-bindgen --target web --no-typescript` does.
//! wasm-bindgen's library alone builds in a third of its CLI's time (no argument
//! parser, test runner, web server or HTTP client), and a fresh machine builds it
//! before it can show a page.

use std::process::ExitCode;

use wasm_bindgen_cli_support::Bindgen;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--version") {
        println!("treeline-bundle {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let [wasm, out_dir, name] = args.as_slice() else {
        eprintln!("usage: treeline-bundle WASM OUT_DIR NAME");
        return ExitCode::from(2);
    };
    let mut bindgen = Bindgen::new();
    let written = bindgen.web(true).and_then(|b| {
        b.input_path(wasm)
            .out_name(name)
            .typescript(false)
            .demangle(true)
            .generate(out_dir)
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("treeline-bundle: {wasm}: {e:#}");
            ExitCode::FAILURE
        }
    }
}
