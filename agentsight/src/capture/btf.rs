//! Kernel struct offsets from `/sys/kernel/btf/vmlinux`, computed at load time
//! so one binary works across kernels (Rust eBPF has no CO-RE relocations).

use std::path::Path;

use agentsight_common::{Offsets, PT_REGS_WORDS};
use btf_rs::{Btf, Type};

#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    #[error("cannot read kernel BTF from {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("kernel BTF has no struct `{0}`")]
    NoStruct(String),
    #[error("kernel BTF struct `{structure}` has no member `{member}`")]
    NoMember { structure: String, member: String },
    #[error("kernel BTF: {0}")]
    Parse(String),
}

pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Reads the offsets the kernel programs need.
pub fn kernel_offsets(path: &Path) -> Result<Offsets, BtfError> {
    let btf = Btf::from_file(path).map_err(|e| BtfError::Unreadable {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let f = |s: &str, m: &str| member_offset(&btf, s, m);
    let offsets = Offsets {
        task_tgid: f("task_struct", "tgid")?,
        task_pid: f("task_struct", "pid")?,
        task_real_parent: f("task_struct", "real_parent")?,
        task_exit_code: f("task_struct", "exit_code")?,
        task_fs: f("task_struct", "fs")?,
        fs_pwd: f("fs_struct", "pwd")?,
        path_mnt: f("path", "mnt")?,
        path_dentry: f("path", "dentry")?,
        dentry_parent: f("dentry", "d_parent")?,
        dentry_name: f("dentry", "d_name")?,
        qstr_len: f("qstr", "len")?,
        qstr_name: f("qstr", "name")?,
        mount_mnt: f("mount", "mnt")?,
        mount_parent: f("mount", "mnt_parent")?,
        mount_mountpoint: f("mount", "mnt_mountpoint")?,
        vfsmount_root: f("vfsmount", "mnt_root")?,
        bprm_file: f("linux_binprm", "file")?,
        bprm_filename: f("linux_binprm", "filename")?,
        bprm_argc: f("linux_binprm", "argc")?,
        file_path: f("file", "f_path")?,
        task_mm: f("task_struct", "mm")?,
        mm_arg_start: f("mm_struct", "arg_start")?,
        mm_arg_end: f("mm_struct", "arg_end")?,
        // x86-64 syscall argument registers, in argument order.
        regs_args: [
            f("pt_regs", "di")?,
            f("pt_regs", "si")?,
            f("pt_regs", "dx")?,
            f("pt_regs", "r10")?,
            f("pt_regs", "r8")?,
            f("pt_regs", "r9")?,
        ],
        regs_nr: f("pt_regs", "orig_ax")?,
        task_ti_status: f("task_struct", "thread_info")? + f("thread_info", "status")?,
        task_files: f("task_struct", "files")?,
        files_fdt: f("files_struct", "fdt")?,
        fdtable_fd: f("fdtable", "fd")?,
        fdtable_max_fds: f("fdtable", "max_fds")?,
        file_inode: f("file", "f_inode")?,
        inode_ino: f("inode", "i_ino")?,
        inode_sb: f("inode", "i_sb")?,
        sb_dev: f("super_block", "s_dev")?,
    };
    // The sys_exit program copies pt_regs' first PT_REGS_WORDS words once
    // and picks the registers from that copy.
    if let Some(o) = offsets
        .regs_args
        .iter()
        .chain([&offsets.regs_nr])
        .find(|&&o| o % 8 != 0 || o as usize >= PT_REGS_WORDS * 8)
    {
        return Err(BtfError::Parse(format!(
            "pt_regs member at byte {o} is outside the {PT_REGS_WORDS} words the sys_exit program reads"
        )));
    }
    Ok(offsets)
}

/// Byte offset of `member` in `struct structure`, looking through anonymous
/// structs and unions (the kernel nests many fields in them).
pub fn member_offset(btf: &Btf, structure: &str, member: &str) -> Result<u32, BtfError> {
    let types = btf
        .resolve_types_by_name(structure)
        .map_err(|_| BtfError::NoStruct(structure.to_owned()))?;
    for ty in types {
        if let Type::Struct(s) = ty
            && let Some(bits) = find_member(btf, &s, member, 0)?
        {
            return Ok(bits / 8);
        }
    }
    Err(BtfError::NoMember {
        structure: structure.to_owned(),
        member: member.to_owned(),
    })
}

fn find_member(
    btf: &Btf,
    s: &btf_rs::Struct,
    member: &str,
    base_bits: u32,
) -> Result<Option<u32>, BtfError> {
    for m in &s.members {
        let name = btf.resolve_name(m).unwrap_or_default();
        if name == member {
            return Ok(Some(base_bits + m.bit_offset()));
        }
        if name.is_empty() {
            let inner = btf
                .resolve_chained_type(m)
                .map_err(|e| BtfError::Parse(e.to_string()))?;
            if let Type::Struct(inner) | Type::Union(inner) = inner
                && let Some(found) = find_member(btf, &inner, member, base_bits + m.bit_offset())?
            {
                return Ok(Some(found));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_of_running_kernel_are_plausible() {
        let path = Path::new(VMLINUX_BTF);
        if !path.exists() {
            panic!("{VMLINUX_BTF} missing: agentsight needs a kernel with BTF");
        }
        let off = kernel_offsets(path).expect("offsets");
        // qstr is { union { struct { u32 hash; u32 len; }; u64 hash_len; }; const char *name; }
        assert_eq!(off.qstr_len, 4);
        assert_eq!(off.qstr_name, 8);
        assert_eq!(off.path_mnt, 0);
        assert_eq!(off.path_dentry, 8);
        assert!(off.task_tgid > 0 && off.task_pid > 0 && off.task_fs > off.task_tgid);
        // x86-64 pt_regs: r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax …
        assert_eq!(off.regs_args, [112, 104, 96, 56, 72, 64]);
        assert_eq!(off.regs_nr, 120);
    }
}
