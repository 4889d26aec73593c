//! A small disk a test can fill: a tmpfs it mounts (as root, as CI runs) on a fresh
//! directory, unmounted when dropped. Where mounting is not permitted, [`SmallDisk::mount`]
//! prints "skipped: cannot mount" and the test passes.

/// A small tmpfs mounted for one test, unmounted (and its mount point removed) when dropped.
pub struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    /// `None` (and a printed "skipped") where this process may not mount.
    pub fn mount(test: &str, size: &str) -> Option<Self> {
        let unique = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir =
            std::env::temp_dir().join(format!("tickwire-full-{}-{unique}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(Self(dir)),
            other => {
                let why = match other {
                    Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                    Err(error) => error.to_string(),
                };
                eprintln!("{test}: skipped: cannot mount a tmpfs ({why})");
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    /// The mount point.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// Writes a file until the disk is full; removing it frees the space again.
    pub fn fill(&self) -> std::path::PathBuf {
        use std::io::Write as _;
        let path = self.0.join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 4096];
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(error) if error.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(error) => panic!("filling the tmpfs: {error}"),
            }
        }
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
        let _ = std::fs::remove_dir(&self.0);
    }
}
