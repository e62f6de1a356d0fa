//! Vetted plugins: ed25519 signatures over a plugin's bytes (and its assets' digests),
//! checked against trusted keys.

use std::borrow::Cow;
use std::path::Path;

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

/// Checks that `bytes` carry a valid signature from one of `trusted_keys` (hex public keys);
/// the key that signed them. The signature is `signature` (hex) or the contents of
/// `<path>.sig`.
pub fn verify_plugin(
    bytes: &[u8],
    path: &Path,
    signature: Option<&str>,
    trusted_keys: &[String],
) -> Result<String, String> {
    let signature = load_signature(path, signature, trusted_keys)?;
    signer(bytes, &signature, trusted_keys)?
        .ok_or_else(|| "its signature does not verify with any trusted key".into())
}

/// [`verify_plugin`] for a plugin with its assets' digests (by name) and its cases file's
/// ([`signed_message`]). Where the signature does not verify, the error says what it would
/// have verified over, where that is something the manifest names only in part (the `.wasm`
/// without its assets or cases: they were left out when it was signed), and otherwise which
/// files it covers: one changed since it was signed, or a key that is not trusted signed it (a
/// signature alone cannot tell the two apart).
pub fn verify_bundle(
    wasm: &[u8],
    assets: &[(&str, &str)],
    cases: Option<&str>,
    path: &Path,
    signature: Option<&str>,
    trusted_keys: &[String],
) -> Result<String, String> {
    let signature = load_signature(path, signature, trusted_keys)?;
    let over = |assets: &[(&str, &str)], cases: Option<&str>| {
        signer(
            &signed_message(wasm, assets.iter().copied(), cases),
            &signature,
            trusted_keys,
        )
    };
    if let Some(key) = over(assets, cases)? {
        return Ok(key);
    }
    let sign_again = "sign it again with them (trident plugin sign PLUGIN --key KEY --asset \
                      NAME=FILE --cases FILE)";
    if (!assets.is_empty() || cases.is_some()) && over(&[], None)?.is_some() {
        return Err(format!(
            "its signature, by a trusted key, covers the .wasm alone, not the assets and cases \
             file the manifest gives it: {sign_again}"
        ));
    }
    if cases.is_some() && over(assets, None)?.is_some() {
        return Err(format!(
            "its signature, by a trusted key, covers the .wasm and its assets but not its cases \
             file: {sign_again}"
        ));
    }
    if !assets.is_empty() && over(&[], cases)?.is_some() {
        return Err(format!(
            "its signature, by a trusted key, covers the .wasm and its cases file but not its \
             assets: {sign_again}"
        ));
    }
    let mut covered = vec!["the .wasm".to_owned()];
    covered.extend(assets.iter().map(|(name, _)| format!("asset '{name}'")));
    covered.extend(cases.map(|_| "the cases file".to_owned()));
    Err(format!(
        "its signature does not verify with any trusted key over {} as they are now: one of \
         them changed since it was signed, or it was signed with other files, or by a key not \
         in trusted_keys",
        covered.join(", ")
    ))
}

/// The signature given, or read from `<path>.sig`; refused where no key is trusted.
fn load_signature(
    path: &Path,
    signature: Option<&str>,
    trusted_keys: &[String],
) -> Result<Signature, String> {
    let text = match signature {
        Some(text) => text.to_owned(),
        None => {
            let sig_path = signature_path(path);
            match crate::files::read_regular_text(&sig_path, MAX_SIGNATURE_BYTES) {
                Ok(text) => text,
                Err(error) => return Err(unsigned_or(&sig_path, error)),
            }
        }
    };
    let signature = parse_signature(text.trim())?;
    if trusted_keys.is_empty() {
        // Only Secure Mode asks for signatures without keys (a manifest cannot).
        return Err(format!(
            "no key is trusted to sign it (under Secure Mode: {})",
            crate::artifacts::controls::PLUGIN_KEYS_ENV
        ));
    }
    Ok(signature)
}

/// The trusted key `signature` over `bytes` verifies with, if any.
fn signer(
    bytes: &[u8],
    signature: &Signature,
    trusted_keys: &[String],
) -> Result<Option<String>, String> {
    for hex_key in trusted_keys {
        let key = parse_public_key(hex_key)?;
        if key.verify(bytes, signature).is_ok() {
            return Ok(Some(hex_key.to_ascii_lowercase()));
        }
    }
    Ok(None)
}

/// What a plugin's signature signs: the `.wasm` file's bytes when it reads no assets and
/// carries no cases; else a statement of the `.wasm` file's SHA-256, each asset's by name, and
/// its cases file's:
///
/// ```text
/// trident-plugin-bundle/1
/// wasm <sha256>
/// asset <name> <sha256>
/// cases <sha256>
/// ```
///
/// (one `asset` line per asset, by name; digests in lower-case hex). So the signature of a
/// plugin covers the labels it reads and the cases it must pass, and a signed plugin whose
/// labels or cases were swapped is refused.
/// Asset names are `[A-Za-z0-9._-]` ([`crate::plugins::runtime::assets::check_specs`]): a name cannot forge a
/// line.
pub fn signed_message<'a, 'b>(
    wasm: &'a [u8],
    assets: impl IntoIterator<Item = (&'b str, &'b str)>,
    cases: Option<&str>,
) -> Cow<'a, [u8]> {
    let mut assets = assets.into_iter().peekable();
    if assets.peek().is_none() && cases.is_none() {
        return Cow::Borrowed(wasm);
    }
    let mut statement = format!(
        "trident-plugin-bundle/1\nwasm {}\n",
        crate::plugins::runtime::digest::sha256_hex(wasm)
    );
    for (name, sha256) in assets {
        statement.push_str(&format!("asset {name} {}\n", sha256.to_ascii_lowercase()));
    }
    if let Some(sha256) = cases {
        statement.push_str(&format!("cases {}\n", sha256.to_ascii_lowercase()));
    }
    Cow::Owned(statement.into_bytes())
}

/// Bytes a `.wasm.sig` file may have (a signature is 128 hex digits).
const MAX_SIGNATURE_BYTES: u64 = 4096;

/// Where the signature of the plugin at `path` is kept when the manifest has none.
fn signature_path(path: &Path) -> std::path::PathBuf {
    path.with_extension("wasm.sig")
}

/// The error for a signature file that could not be read: "not signed" when there is none.
fn unsigned_or(sig_path: &Path, error: crate::files::FileError) -> String {
    if error.is_not_found() {
        format!(
            "is not signed (no signature in the manifest and no {})",
            sig_path.display()
        )
    } else {
        format!("its signature: {error}")
    }
}

/// The contents of the plugin at `path`'s `.wasm.sig`, read off the serving threads within
/// [`crate::files::READ_DEADLINE`] (a regular file of at most 4 KiB); `None` when there is none
/// ([`verify_plugin`] then says the plugin is not signed).
pub async fn read_signature_file(path: &Path) -> Result<Option<String>, String> {
    let sig_path = signature_path(path);
    match crate::files::read_text(&sig_path, MAX_SIGNATURE_BYTES).await {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(unsigned_or(&sig_path, error)),
    }
}

fn decode<const N: usize>(what: &str, text: &str) -> Result<[u8; N], String> {
    let bytes = hex::decode(text.trim()).map_err(|_| format!("{what} is not hex"))?;
    bytes
        .try_into()
        .map_err(|_| format!("{what} must be {N} bytes"))
}

/// An ed25519 signature from its hex form (64 bytes, 128 hex digits).
pub fn parse_signature(text: &str) -> Result<Signature, String> {
    Ok(Signature::from_bytes(&decode::<64>("signature", text)?))
}

/// An ed25519 public key from its hex form (32 bytes, 64 hex digits).
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, String> {
    VerifyingKey::from_bytes(&decode::<32>("public key", text)?)
        .map_err(|e| format!("invalid public key: {e}"))
}

/// Signs `bytes` with a hex secret key; returns the hex signature.
pub fn sign(bytes: &[u8], secret_key_hex: &str) -> Result<String, String> {
    let key = SigningKey::from_bytes(&decode::<32>("secret key", secret_key_hex)?);
    Ok(hex::encode(key.sign(bytes).to_bytes()))
}

/// The hex public key of a hex secret key.
pub fn public_key(secret_key_hex: &str) -> Result<String, String> {
    let key = SigningKey::from_bytes(&decode::<32>("secret key", secret_key_hex)?);
    Ok(hex::encode(key.verifying_key().to_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";

    #[test]
    fn sign_then_verify() {
        let public = [public_key(SECRET).unwrap()];
        let signature = sign(b"plugin bytes", SECRET).unwrap();
        let path = Path::new("/nonexistent/p.wasm");
        assert!(verify_plugin(b"plugin bytes", path, Some(&signature), &public).is_ok());
        let tampered = verify_plugin(b"plugin bytez", path, Some(&signature), &public);
        assert!(
            tampered
                .unwrap_err()
                .contains("does not verify with any trusted key")
        );
        let other = public_key(&"11".repeat(32)).unwrap();
        assert!(verify_plugin(b"plugin bytes", path, Some(&signature), &[other]).is_err());
        let unsigned = verify_plugin(b"plugin bytes", path, None, &public).unwrap_err();
        assert!(unsigned.contains("is not signed"), "{unsigned}");
    }

    #[test]
    fn a_signature_covers_the_assets_by_digest() {
        let public = [public_key(SECRET).unwrap()];
        let path = Path::new("/nonexistent/p.wasm");
        let labels = [("labels", "aa".repeat(32))];
        let labels = labels.iter().map(|(n, d)| (*n, d.as_str()));
        let message = signed_message(b"wasm", labels.clone(), None);
        assert!(message.starts_with(b"trident-plugin-bundle/1\nwasm "));
        let signature = sign(&message, SECRET).unwrap();
        assert!(verify_plugin(&message, path, Some(&signature), &public).is_ok());
        // Other labels, or none, are another message.
        let swapped = [("labels", "bb".repeat(32))];
        let swapped = signed_message(b"wasm", swapped.iter().map(|(n, d)| (*n, d.as_str())), None);
        assert!(verify_plugin(&swapped, path, Some(&signature), &public).is_err());
        let bare = signed_message(b"wasm", [], None);
        assert_eq!(&*bare, b"wasm");
        assert!(verify_plugin(&bare, path, Some(&signature), &public).is_err());
        // Cases are covered too: adding, dropping or swapping them is another message.
        let cases = "cc".repeat(32);
        let with_cases = signed_message(b"wasm", labels.clone(), Some(&cases));
        assert!(with_cases.ends_with(format!("cases {cases}\n").as_bytes()));
        assert!(verify_plugin(&with_cases, path, Some(&signature), &public).is_err());
        let signature = sign(&with_cases, SECRET).unwrap();
        assert!(verify_plugin(&with_cases, path, Some(&signature), &public).is_ok());
        let other = signed_message(b"wasm", labels, Some(&"dd".repeat(32)));
        assert!(verify_plugin(&other, path, Some(&signature), &public).is_err());
        let only_cases = signed_message(b"wasm", [], Some(&cases));
        assert!(only_cases.starts_with(b"trident-plugin-bundle/1\n"));
    }

    /// A signature by a trusted key over less than the manifest names says what it left out;
    /// one over other contents names the files it covers, not an untrusted key.
    #[test]
    fn a_bundle_that_does_not_verify_says_what_its_signature_covers() {
        let public = [public_key(SECRET).unwrap()];
        let path = Path::new("/nonexistent/p.wasm");
        let (aa, bb, cc) = ("aa".repeat(32), "bb".repeat(32), "cc".repeat(32));
        let labels = [("labels", aa.as_str())];
        let sign_over = |assets: &[(&str, &str)], cases: Option<&str>| {
            sign(
                &signed_message(b"wasm", assets.iter().copied(), cases),
                SECRET,
            )
            .unwrap()
        };
        let verify = |signature: &str, assets: &[(&str, &str)], cases: Option<&str>| {
            verify_bundle(b"wasm", assets, cases, path, Some(signature), &public)
        };
        let full = sign_over(&labels, Some(&cc));
        assert!(verify(&full, &labels, Some(&cc)).is_ok());
        let changed = verify(&full, &[("labels", bb.as_str())], Some(&cc)).unwrap_err();
        assert!(
            changed.contains("over the .wasm, asset 'labels', the cases file as they are now")
                && changed.contains("changed since it was signed"),
            "{changed}"
        );
        let bare = verify(&sign_over(&[], None), &labels, Some(&cc)).unwrap_err();
        assert!(bare.contains("covers the .wasm alone"), "{bare}");
        let no_cases = verify(&sign_over(&labels, None), &labels, Some(&cc)).unwrap_err();
        assert!(no_cases.contains("but not its cases file"), "{no_cases}");
        let no_assets = verify(&sign_over(&[], Some(&cc)), &labels, Some(&cc)).unwrap_err();
        assert!(no_assets.contains("but not its assets"), "{no_assets}");
        let other_key = [public_key(&"11".repeat(32)).unwrap()];
        let untrusted = verify_bundle(b"wasm", &labels, None, path, Some(&full), &other_key);
        assert!(
            untrusted
                .unwrap_err()
                .contains("or by a key not in trusted_keys")
        );
    }
}
