use super::*;

#[test]
fn percent_u_is_read_as_iis_reads_it() {
    assert_eq!(percent_u(b"%u002f", 0), Some('/'));
    assert_eq!(percent_u(b"x%U002E", 1), Some('.'));
    assert_eq!(percent_u(b"%u002", 0), None, "too short");
    assert_eq!(percent_u(b"%u00g2", 0), None, "not hex");
    assert_eq!(percent_u(b"%ud800", 0), None, "a lone surrogate");
    let read = |raw: &str| {
        let set = applicable(raw);
        assert!(set & Transform::Windows as u8 != 0, "{raw}");
        apply(raw, Transform::Windows as u8)
    };
    assert_eq!(read("/%u002fproducts"), "//products");
    assert_eq!(read("/x/%u002e%u002e/products"), "/x/../products");
    assert_eq!(read("/%u0070roducts"), "/products");
    assert_eq!(
        read("/a%u0025%u0032%u0065"),
        "/a%252e",
        "no second decoding"
    );
    assert_eq!(read("/caf%u00e9"), "/caf%C3%A9");
    // Combined with the readings behind IIS: `;params` and NUL.
    let both = Transform::Windows as u8 | Transform::Params as u8;
    assert_eq!(applicable("/x/..%u003b/shop") & both, both);
    assert_eq!(apply("/x/..%u003b/shop", both), "/x/../shop");
    let nul = Transform::Windows as u8 | Transform::Nul as u8;
    assert_eq!(applicable("/shop%u0000.css") & nul, nul);
    assert_eq!(apply("/shop%u0000.css", nul), "/shop");
}

#[test]
fn asp_net_cookieless_values_are_read_as_absent() {
    for seg in [
        "(S(x))",
        "(s(abc123))",
        "(A(a)S(b)F(c))",
        "(X(1)S(x))",
        "%28S%28x%29%29",
        "(S())",
        "(S(a(b))",
        "(S((x))",
        "(A(a(b)S(c))",
    ] {
        assert!(is_cookieless(seg), "{seg}");
    }
    for seg in [
        "(S(x)",
        "S(x)",
        "(x)",
        "()",
        "(S(x)y)",
        "(1(x))",
        "(S(a(b)))",
        "(S(a%2Fb))",
        "products",
        "",
    ] {
        assert!(!is_cookieless(seg), "{seg}");
    }
    let read = |raw: &str| {
        assert!(applicable(raw) & Transform::Windows as u8 != 0, "{raw}");
        apply(raw, Transform::Windows as u8)
    };
    assert_eq!(read("/(S(x))/orders"), "/orders");
    assert_eq!(read("/shop/(F(t))/orders/1"), "/shop/orders/1");
    assert_eq!(read("/%28S%28x%29%29/orders"), "/orders");
    assert_eq!(read("/(S(x)).\\orders"), "/orders");
}

#[test]
fn dot_only_segments_keep_their_meaning() {
    assert_eq!(strip_windows_tail(".."), "..");
    assert_eq!(strip_windows_tail("."), ".");
    assert_eq!(strip_windows_tail("a. ."), "a");
    assert_eq!(strip_windows_tail("a%2e"), "a");
}
