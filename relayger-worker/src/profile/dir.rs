//! The profile directory: creating, reading, listing and deleting profile
//! files, and the name of the current one.

use std::io::Write;
use std::path::{Path, PathBuf};

use relayger_core::naming::is_valid_profile_name;

use super::{CURRENT_FILE, DEFAULT_PROFILE, FORMAT_VERSION, HOME_ENV, Profile, ProfileError};

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

/// The core's profile-name rule: `[A-Za-z0-9._-]{1,64}`, but not `.` or `..`.
pub(super) fn check_name(name: &str) -> Result<(), ProfileError> {
    if is_valid_profile_name(name) {
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
