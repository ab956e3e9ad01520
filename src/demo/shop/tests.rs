use super::*;

#[test]
fn prices_are_grouped_in_thousands() {
    assert_eq!(format_krw(0), "₩0");
    assert_eq!(format_krw(999), "₩999");
    assert_eq!(format_krw(39_000), "₩39,000");
    assert_eq!(format_krw(189_000), "₩189,000");
    assert_eq!(format_krw(1_234_567), "₩1,234,567");
}

#[test]
fn ids_are_parsed_strictly() {
    assert_eq!(parse_id("1"), Some(1));
    assert_eq!(parse_id("6"), Some(6));
    for bad in [
        "",
        "0",
        "7",
        "01",
        "+1",
        " 1",
        "1 ",
        "-1",
        "1a",
        "999999999999",
        "６",
    ] {
        assert_eq!(parse_id(bad), None, "{bad:?}");
    }
}

#[test]
fn cart_round_trips_and_is_capped() {
    assert_eq!(parse_cart(""), Vec::<u32>::new());
    assert_eq!(parse_cart("1,2,2,6"), vec![1, 2, 2, 6]);
    assert_eq!(parse_cart("1,x,9,,3,<b>"), vec![1, 3]);
    assert_eq!(serialize_cart(&[1, 2, 2]), "1,2,2");
    assert_eq!(parse_cart(&serialize_cart(&[5, 4, 3])), vec![5, 4, 3]);
    assert_eq!(parse_cart(&vec!["1"; 50].join(",")).len(), MAX_CART);
    assert_eq!(
        set_cart_cookie(&[1, 3]),
        "shop_cart=1,3; Path=/; SameSite=Lax"
    );
    assert_eq!(clear_cart_cookie(), "shop_cart=; Path=/; Max-Age=0");
}

#[test]
fn cart_is_found_among_cookies() {
    let h: &[u8] = b"a=1; shop_cart=2,4; anteroom_vid=x";
    assert_eq!(cart_from_cookies([h]), vec![2, 4]);
    assert_eq!(
        cart_from_cookies([b"shop_cartx=1".as_slice()]),
        Vec::<u32>::new()
    );
    assert_eq!(
        cart_from_cookies([b"\xff\xfe".as_slice(), b"shop_cart=5".as_slice()]),
        vec![5]
    );
    assert_eq!(cart_from_cookies(Vec::<&[u8]>::new()), Vec::<u32>::new());
}

#[test]
fn forms_are_decoded() {
    assert_eq!(form_value(b"product=3", "product").as_deref(), Some("3"));
    assert_eq!(
        form_value(b"a=b&product=%34&product=5", "product").as_deref(),
        Some("4")
    );
    assert_eq!(form_value(b"q=a+b%21", "q").as_deref(), Some("a b!"));
    assert_eq!(form_value(b"product", "product").as_deref(), Some(""));
    assert_eq!(form_value(b"product=%zz", "product"), None);
    assert_eq!(form_value(b"product=%4", "product"), None);
    assert_eq!(form_value(b"\xff=1", "product"), None);
    assert_eq!(form_value(b"", "product"), None);
}

#[test]
fn html_is_escaped() {
    assert_eq!(
        html_escape("<a href=\"x\">'&'</a>"),
        "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
    );
}

#[test]
fn routes() {
    let (get, post, put) = (Method::GET, Method::POST, Method::PUT);
    assert_eq!(route(&get, "/"), Route::Home);
    assert_eq!(route(&Method::HEAD, "/products"), Route::Products);
    assert_eq!(route(&get, "/products/3"), Route::Product(3));
    assert_eq!(route(&get, "/products/7"), Route::NotFound);
    assert_eq!(route(&get, "/products/03"), Route::NotFound);
    assert_eq!(route(&post, "/products/3"), Route::NotAllowed("GET, HEAD"));
    assert_eq!(route(&get, "/cart"), Route::Cart);
    assert_eq!(route(&post, "/cart"), Route::AddToCart);
    assert_eq!(route(&put, "/cart"), Route::NotAllowed("GET, HEAD, POST"));
    assert_eq!(route(&post, "/orders"), Route::PlaceOrder);
    assert_eq!(route(&get, "/orders"), Route::NotAllowed("POST"));
    assert_eq!(route(&get, "/admin"), Route::NotFound);
}

#[test]
fn handler_adds_to_cart_and_places_orders() {
    let shop = Shop::new();
    let r = shop.handle(Route::AddToCart, b"product=2", vec![1]);
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()[LOCATION], "/cart");
    assert_eq!(
        r.headers()[SET_COOKIE],
        "shop_cart=1,2; Path=/; SameSite=Lax"
    );
    assert_eq!(r.headers()[CACHE_CONTROL], "no-store");
    let bad = shop.handle(Route::AddToCart, b"product=<script>", vec![]);
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let cart = shop.handle(Route::Cart, b"", vec![1, 2, 2]);
    let text = String::from_utf8_lossy(cart.body()).into_owned();
    assert!(
        text.contains("₩75,000") && text.contains("action=\"/orders\"") && text.contains(BANNER)
    );
    let empty = String::from_utf8_lossy(shop.handle(Route::Cart, b"", vec![]).body()).into_owned();
    assert!(!empty.contains("Place order"));
    let o = shop.handle(Route::PlaceOrder, b"", vec![1]);
    assert_eq!(shop.orders(), 1);
    assert!(String::from_utf8_lossy(o.body()).contains("Order #1 placed — thank you"));
    assert_eq!(o.headers()[SET_COOKIE], "shop_cart=; Path=/; Max-Age=0");
    let len: usize = o.headers()[CONTENT_LENGTH]
        .to_str()
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    assert_eq!(len, o.body().len());
    assert_eq!(Shop::default().orders(), 0);
}
