//! Local profiles: one JSON file per identity under `$RELAYGER_HOME`, holding
//! the server URL, a token and the identity's X25519 key pair. The format is
//! documented in `docs/profiles.md`; other clients (the JavaScript SDK) read
//! the same files.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use relayger_core::ids::IdentityNumber;
use relayger_core::sealed::KeyPair;
use relayger_core::wire::{IdentityKind, RegisterResponse};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use uuid::Uuid;

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "default";
/// The environment variable naming the profile directory.
pub const HOME_ENV: &str = "RELAYGER_HOME";
/// The file under the profile directory naming the profile chosen with
/// `relayger profiles use NAME`: the default when none is named.
pub const CURRENT_FILE: &str = "current";
/// The file format version this crate writes and reads.
const FORMAT_VERSION: u32 = 1;
const MAX_NAME_CHARS: usize = 64;

/// Why a profile could not be found, read or written.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// Profile names are 1–64 of `A-Z a-z 0-9 . _ -` (and not `.`/`..`).
    #[error("`{name}` is not a valid profile name: use 1 to 64 of A-Z a-z 0-9 . _ -")]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// No file for this profile.
    #[error(
        "profile `{name}` does not exist in {}; create it with `relayger{} register --server URL --name NAME` (or, from a person's profile, `relayger agents create --name NAME --save-as {name}`)",
        dir.display(),
        profile_flag(name)
    )]
    NotFound {
        /// The profile's name.
        name: String,
        /// The directory searched.
        dir: PathBuf,
    },
    /// Creating a profile never replaces one: that would lose its key.
    #[error("profile `{name}` already exists ({}); choose another name", path.display())]
    AlreadyExists {
        /// The profile's name.
        name: String,
        /// Its file.
        path: PathBuf,
    },
    /// The file is not a profile this version understands.
    #[error("profile file {} is not valid: {message}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The stored key pair is unusable.
    #[error("the key pair of the profile for {number} is not valid: {message}")]
    InvalidKey {
        /// The profile's identity number.
        number: IdentityNumber,
        /// What is wrong with the key.
        message: String,
    },
    /// Neither `$RELAYGER_HOME` nor a user config directory.
    #[error("no profile directory: set {HOME_ENV}")]
    NoHome,
    /// The file system refused.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done (`read`, `write`, …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

fn profile_flag(name: &str) -> String {
    if name == DEFAULT_PROFILE {
        String::new()
    } else {
        format!(" --profile {name}")
    }
}

/// One profile file: everything a client needs to act as one identity.
/// Field names are the camelCase keys of the JSON file.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// The file format version (1).
    pub version: u32,
    /// The server's base URL, e.g. `http://127.0.0.1:7070`.
    pub server: String,
    /// The id of the token below (for `tokens list`/`revoke`).
    pub token_id: Uuid,
    /// The bearer token's secret.
    pub token: String,
    /// The identity's id.
    pub identity_id: Uuid,
    /// The identity's number.
    pub number: IdentityNumber,
    /// Person or agent.
    pub kind: IdentityKind,
    /// The name given at registration.
    pub display_name: String,
    /// For an agent created by a person: the owner's number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_number: Option<IdentityNumber>,
    /// Base64 of the X25519 public key (the one the server knows).
    pub public_key: String,
    /// Base64 of the X25519 secret key; never leaves this file.
    pub secret_key: String,
}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profile")
            .field("server", &self.server)
            .field("token_id", &self.token_id)
            .field("identity_id", &self.identity_id)
            .field("number", &self.number)
            .field("kind", &self.kind)
            .field("display_name", &self.display_name)
            .finish_non_exhaustive()
    }
}

impl Profile {
    /// The profile for an identity just registered (or created as an agent)
    /// on `server` with `key_pair`.
    pub fn from_registration(
        server: &str,
        response: &RegisterResponse,
        key_pair: &KeyPair,
    ) -> Profile {
        let identity = &response.identity;
        Profile {
            version: FORMAT_VERSION,
            server: server.trim_end_matches('/').to_owned(),
            token_id: response.token.id,
            token: response.token.secret.clone(),
            identity_id: identity.id,
            number: identity.number.clone(),
            kind: identity.kind,
            display_name: identity.display_name.clone(),
            owner_number: identity.owner_number.clone(),
            public_key: key_pair.public_base64(),
            secret_key: key_pair.secret_base64(),
        }
    }

    /// The key pair stored in the profile; its public half must be the
    /// `publicKey` the profile records.
    pub fn key_pair(&self) -> Result<KeyPair, ProfileError> {
        let invalid = |message: String| ProfileError::InvalidKey {
            number: self.number.clone(),
            message,
        };
        let key_pair = KeyPair::from_secret_base64(&self.secret_key)
            .map_err(|err| invalid(format!("secretKey: {err}")))?;
        if key_pair.public_base64() != self.public_key {
            return Err(invalid(
                "publicKey is not the public half of secretKey".into(),
            ));
        }
        Ok(key_pair)
    }
}

/// One entry of [`ProfileDir::list`]: a name and its profile, or why the
/// file could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub struct ProfileEntry {
    /// The profile's name (its file name without `.json`).
    pub name: String,
    /// The profile, or why it could not be read.
    pub profile: Result<Profile, ProfileError>,
}

/// The directory that holds the profiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileDir {
    path: PathBuf,
}

impl ProfileDir {
    /// `$RELAYGER_HOME`, else the user's config directory + `/relayger`.
    pub fn from_env() -> Result<ProfileDir, ProfileError> {
        match std::env::var_os(HOME_ENV) {
            Some(home) if !home.is_empty() => Ok(ProfileDir::at(home)),
            _ => dirs::config_dir()
                .map(|config| ProfileDir::at(config.join("relayger")))
                .ok_or(ProfileError::NoHome),
        }
    }

    /// Profiles under `path`.
    pub fn at(path: impl Into<PathBuf>) -> ProfileDir {
        ProfileDir { path: path.into() }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file profile `name` lives in.
    pub fn file(&self, name: &str) -> Result<PathBuf, ProfileError> {
        check_name(name)?;
        Ok(self.path.join(format!("{name}.json")))
    }

    /// Reads profile `name`.
    pub fn load(&self, name: &str) -> Result<Profile, ProfileError> {
        let path = self.file(name)?;
        let bytes =
            std::fs::read(&path).map_err(|err| self.file_error(name, "read", &path, err))?;
        let profile: Profile =
            serde_json::from_slice(&bytes).map_err(|err| ProfileError::Malformed {
                path: path.clone(),
                message: err.to_string(),
            })?;
        if profile.version != FORMAT_VERSION {
            return Err(ProfileError::Malformed {
                path,
                message: format!(
                    "format version {} is not {FORMAT_VERSION}, the one this relayger reads",
                    profile.version
                ),
            });
        }
        if let Err(err) = profile.key_pair() {
            return Err(ProfileError::Malformed {
                path,
                message: err.to_string(),
            });
        }
        Ok(profile)
    }

    /// Fails unless `name` is valid and no profile of that name exists yet;
    /// checked before registering so that an identity is never created
    /// without a place to keep its key.
    pub fn check_available(&self, name: &str) -> Result<(), ProfileError> {
        let path = self.file(name)?;
        match std::fs::symlink_metadata(&path) {
            Ok(_) => Err(ProfileError::AlreadyExists {
                name: name.to_owned(),
                path,
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(ProfileError::Io {
                action: "inspect",
                path,
                source,
            }),
        }
    }

    /// Writes a new profile `name` (never replacing one): the directory is
    /// created mode 0700, the file mode 0600, written to a temporary file
    /// and hard-linked into place so a reader never sees half a profile. The
    /// link fails if `name` appeared in the meantime (another process saving
    /// the same name at the same moment): that one is kept and this call is
    /// [`ProfileError::AlreadyExists`].
    pub fn create(&self, name: &str, profile: &Profile) -> Result<PathBuf, ProfileError> {
        self.check_available(name)?;
        let path = self.file(name)?;
        self.create_dir()?;
        let mut json =
            serde_json::to_vec_pretty(profile).map_err(|err| ProfileError::Malformed {
                path: path.clone(),
                message: err.to_string(),
            })?;
        json.push(b'\n');
        if !self.write_atomically(&format!("{name}.json"), &path, &json, false)? {
            return Err(ProfileError::AlreadyExists {
                name: name.to_owned(),
                path,
            });
        }
        Ok(path)
    }

    /// Writes `bytes` (mode 0600) to a temporary file in the directory,
    /// then puts it at `path` so a reader never sees half a file: renamed
    /// over what is there when `replace`, else hard-linked, which never
    /// replaces a file (false: `path` appeared in the meantime, kept).
    fn write_atomically(
        &self,
        file: &str,
        path: &Path,
        bytes: &[u8],
        replace: bool,
    ) -> Result<bool, ProfileError> {
        static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let unique = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let temp = self
            .path
            .join(format!(".{file}.{}.{unique}.tmp", std::process::id()));
        let io = |action: &'static str, path: &Path| {
            let path = path.to_owned();
            move |source| ProfileError::Io {
                action,
                path,
                source,
            }
        };
        write_private(&temp, bytes)
            .map_err(io("write", &temp))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&temp);
            })?;
        let placed = if replace {
            std::fs::rename(&temp, path)
        } else {
            std::fs::hard_link(&temp, path)
        };
        let _ = std::fs::remove_file(&temp);
        match placed {
            Ok(()) => {}
            Err(err) if !replace && err.kind() == std::io::ErrorKind::AlreadyExists => {
                return Ok(false);
            }
            Err(err) => return Err(io("write", path)(err)),
        }
        sync_dir(&self.path);
        Ok(true)
    }

    /// The profile chosen with [`ProfileDir::set_current`], if any (a
    /// missing or empty `current` file is none; a bad name in it is an error).
    pub fn current(&self) -> Result<Option<String>, ProfileError> {
        let path = self.path.join(CURRENT_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let name = text.trim();
                if name.is_empty() {
                    return Ok(None);
                }
                check_name(name)?;
                Ok(Some(name.to_owned()))
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ProfileError::Io {
                action: "read",
                path,
                source,
            }),
        }
    }

    /// The profile a run uses: `named` (from `--profile` or
    /// `$RELAYGER_PROFILE`), else the current one, else [`DEFAULT_PROFILE`].
    pub fn resolve(&self, named: Option<String>) -> Result<String, ProfileError> {
        match named {
            Some(name) => Ok(name),
            None => Ok(self
                .current()?
                .unwrap_or_else(|| DEFAULT_PROFILE.to_owned())),
        }
    }

    /// Makes `name` (an existing, readable profile) the one used when none
    /// is named; written atomically.
    pub fn set_current(&self, name: &str) -> Result<(), ProfileError> {
        self.load(name)?;
        let path = self.path.join(CURRENT_FILE);
        self.write_atomically(CURRENT_FILE, &path, format!("{name}\n").as_bytes(), true)?;
        Ok(())
    }

    /// Deletes profile `name`'s file (its token and private key are gone
    /// for good; the token is not revoked on the server). When it was the
    /// current profile, none is current afterwards.
    pub fn delete(&self, name: &str) -> Result<PathBuf, ProfileError> {
        let path = self.file(name)?;
        std::fs::remove_file(&path).map_err(|err| self.file_error(name, "delete", &path, err))?;
        if self.current()?.as_deref() == Some(name) {
            let current = self.path.join(CURRENT_FILE);
            std::fs::remove_file(&current).map_err(|source| ProfileError::Io {
                action: "delete",
                path: current,
                source,
            })?;
        }
        sync_dir(&self.path);
        Ok(path)
    }

    /// `NotFound` for a missing profile file, else the I/O error.
    fn file_error(
        &self,
        name: &str,
        action: &'static str,
        path: &Path,
        err: std::io::Error,
    ) -> ProfileError {
        if err.kind() == std::io::ErrorKind::NotFound {
            ProfileError::NotFound {
                name: name.to_owned(),
                dir: self.path.clone(),
            }
        } else {
            ProfileError::Io {
                action,
                path: path.to_owned(),
                source: err,
            }
        }
    }

    /// Every profile in the directory, by name (none when it does not exist).
    pub fn list(&self) -> Result<Vec<ProfileEntry>, ProfileError> {
        let entries = match std::fs::read_dir(&self.path) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(ProfileError::Io {
                    action: "list",
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let file_name = entry.file_name().into_string().ok()?;
                let name = file_name.strip_suffix(".json")?;
                check_name(name).ok()?;
                Some(name.to_owned())
            })
            .collect();
        names.sort();
        Ok(names
            .into_iter()
            .map(|name| ProfileEntry {
                profile: self.load(&name),
                name,
            })
            .collect())
    }

    fn create_dir(&self) -> Result<(), ProfileError> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            // Only directories created here get 0700; an existing directory
            // the user chose keeps its mode (the files are 0600 regardless).
            builder.mode(0o700);
        }
        builder
            .create(&self.path)
            .map_err(|source| ProfileError::Io {
                action: "create",
                path: self.path.clone(),
                source,
            })
    }
}

/// `[A-Za-z0-9._-]{1,64}`, but not `.` or `..`.
fn check_name(name: &str) -> Result<(), ProfileError> {
    let valid = (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && name != "."
        && name != "..";
    if valid {
        Ok(())
    } else {
        Err(ProfileError::InvalidName {
            name: name.to_owned(),
        })
    }
}

/// Creates `path` (which must not exist) readable only by its owner, writes
/// `bytes` and flushes them to disk.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Makes a rename durable; best effort, as not every platform can open a
/// directory.
fn sync_dir(path: &Path) {
    if let Ok(dir) = std::fs::File::open(path) {
        let _ = dir.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(display_name: &str) -> Profile {
        let key_pair = KeyPair::generate().expect("key pair");
        Profile {
            version: FORMAT_VERSION,
            server: "http://127.0.0.1:7070".into(),
            token_id: Uuid::now_v7(),
            token: format!("rlg_{display_name}"),
            identity_id: Uuid::now_v7(),
            number: IdentityNumber::parse("100000001").expect("number"),
            kind: IdentityKind::Person,
            display_name: display_name.into(),
            owner_number: None,
            public_key: key_pair.public_base64(),
            secret_key: key_pair.secret_base64(),
        }
    }

    /// Many saves of one name at the same moment: exactly one wins, the rest
    /// are `AlreadyExists`, and the file is the winner's, whole.
    #[test]
    fn concurrent_creates_of_one_name_never_replace_each_other() {
        let dir = std::env::temp_dir().join(format!("relayger-profile-race-{}", Uuid::now_v7()));
        let profiles = ProfileDir::at(&dir);
        let barrier = std::sync::Barrier::new(8);
        let outcomes: Vec<(String, Result<PathBuf, ProfileError>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let (profiles, barrier) = (&profiles, &barrier);
                    scope.spawn(move || {
                        let mine = profile(&format!("writer-{i}"));
                        barrier.wait();
                        (mine.display_name.clone(), profiles.create("same", &mine))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        let winners: Vec<&String> = outcomes
            .iter()
            .filter(|(_, outcome)| outcome.is_ok())
            .map(|(name, _)| name)
            .collect();
        assert_eq!(winners.len(), 1, "{outcomes:?}");
        for (_, outcome) in &outcomes {
            if let Err(err) = outcome {
                assert!(matches!(err, ProfileError::AlreadyExists { .. }), "{err}");
            }
        }
        let saved = profiles.load("same").expect("load");
        assert_eq!(&saved.display_name, winners[0]);
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn name_table() {
        let good = [
            "default",
            "a",
            "receiver-2",
            "bot.prod",
            "A_b-c.9",
            &"x".repeat(64),
        ];
        for name in good {
            assert!(check_name(name).is_ok(), "{name}");
        }
        let bad = [
            "",
            ".",
            "..",
            "a/b",
            "../x",
            "a b",
            "é",
            "name\0",
            &"x".repeat(65),
        ];
        for name in bad {
            assert!(check_name(name).is_err(), "{name:?}");
        }
    }
}
