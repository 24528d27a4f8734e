/* A file an upload replaces. Its name goes with the commit's rename, but its blocks are
 * freed only when its last reference goes, and the rename holds the only one: freeing a
 * file of gigabytes there (page by page on tmpfs, extent by extent on ext4) would hold up
 * the reply to the upload and the session's next command. So the commit takes a reference
 * of its own first, and a big file's is dropped on a thread of its own once the upload is
 * done: the reply goes while the blocks are freed. */
#ifndef XFTP_RELEASE_H
#define XFTP_RELEASE_H

/* A reference (an O_PATH descriptor) to leaf in dir_fd as it is now, or -1 when none is
 * worth holding: no such name, not a regular file of one link, under XFTP_RELEASE_APART
 * bytes allocated, or a file system that is not known to free a removed file at its
 * close (ext4, XFS, btrfs, tmpfs; NFS would show it as .nfsXXXX meanwhile). */
int xftp_release_hold(int dir_fd, const char *leaf);

/* Drops a reference xftp_release_hold took (-1: nothing) on a detached thread, one at a
 * time per process; when that thread is busy or cannot start, it is closed here. */
void xftp_release_later(int fd);

#define XFTP_RELEASE_APART (16ull << 20)

#endif
