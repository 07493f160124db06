package disk

import "path"

// TemporarySuffix ends the name of a file WriteFileAtomically is writing;
// a recovery that finds one removes it, since a crash stopped the write
// before its rename.
const TemporarySuffix = ".tmp"

// WriteFileAtomically replaces dir/name with data so that after a crash
// the file holds either its old or its new content, never a mix: write a
// temporary file, sync it, rename it over the old one, sync the directory.
// When it returns nil the new content is durable.
func WriteFileAtomically(fs FS, dir, name string, data []byte) error {
	temporary := path.Join(dir, name+TemporarySuffix)
	file, err := fs.Create(temporary)
	if err != nil {
		return err
	}
	if _, err := file.Write(data); err != nil {
		file.Close()
		return err
	}
	if err := file.Sync(); err != nil {
		file.Close()
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	if err := fs.Rename(temporary, path.Join(dir, name)); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}
