//! Reading `Accept` and `Accept-Language`.

/// The items of a header like `Accept` or `Accept-Language`, lowercased, with their quality
/// (`q=`, 1 when absent).
pub fn weighted(header: &str) -> impl Iterator<Item = (String, f32)> + '_ {
    header.split(',').map(|item| {
        let mut parts = item.split(';');
        let value = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        // A parameter's name is case-insensitive (RFC 9110): `Q=0.1` weighs as `q=0.1`.
        let q = parts
            .filter_map(|p| {
                let (name, value) = p.split_once('=')?;
                name.trim().eq_ignore_ascii_case("q").then_some(value)
            })
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        (value, q)
    })
}

/// Whether the `Accept` header prefers JSON over HTML.
pub fn prefers_json(accept: &str) -> bool {
    let (mut json, mut html, mut json_explicit, mut html_explicit) = (0.0f32, 0.0f32, false, false);
    for (ty, q) in weighted(accept) {
        match ty.as_str() {
            "application/json" => {
                json = q;
                json_explicit = true;
            }
            "text/html" => {
                html = q;
                html_explicit = true;
            }
            "application/*" if !json_explicit => json = json.max(q),
            "text/*" if !html_explicit => html = html.max(q),
            "*/*" => {
                if !json_explicit {
                    json = json.max(q);
                }
                if !html_explicit {
                    html = html.max(q);
                }
            }
            _ => {}
        }
    }
    json > html || (json == html && json > 0.0 && json_explicit && !html_explicit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        assert!(prefers_json("application/json"));
        assert!(prefers_json("application/json, text/plain, */*"));
        assert!(!prefers_json(
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        ));
        assert!(!prefers_json("*/*"));
        assert!(!prefers_json(""));
        assert!(prefers_json("text/html;q=0.5, application/json"));
        assert!(!prefers_json("application/json;q=0.1, text/html"));
        // Found by review: an upper-case parameter name was not read.
        assert!(!prefers_json("application/json;Q=0.1, text/html;q=0.5"));
        assert!(!prefers_json("text/html;q=0.5, application/json ; Q = 0.1"));
    }
}
