package record

// Iterator validates the concatenated batches of a buffer one at a time, so a
// caller can act on each good batch without collecting headers first:
//
//	iterator := record.NewIterator(buffer, limits)
//	for iterator.Next() {
//		use(iterator.Header(), iterator.Batch())
//	}
//	if err := iterator.Err(); err != nil { ... }
//
// It stops at the first batch that fails Validate's checks (all but the last,
// which is about a single batch filling the buffer). The buffer is the
// caller's; the iterator neither copies nor changes it.
type Iterator struct {
	buffer []byte
	limits Limits
	// next is where the batch after the current one starts.
	next int
	// position is where the current batch starts.
	position int
	header   Header
	err      *Error
}

// NewIterator returns an iterator over the batches in buffer. It panics if
// limits fail Limits.Validate.
func NewIterator(buffer []byte, limits Limits) *Iterator {
	assertLimits(limits)
	return &Iterator{buffer: buffer, limits: limits}
}

// Next validates the next batch and reports whether it passed. It returns
// false at the end of the buffer and at the first failure; Err tells which.
func (it *Iterator) Next() bool {
	if it.err != nil || it.next == len(it.buffer) {
		return false
	}
	header, err := validateBatch(it.buffer[it.next:], it.limits)
	if err != nil {
		it.err = err.withBase(it.next)
		return false
	}
	it.position = it.next
	it.header = header
	it.next += header.Size()
	return true
}

// Header is the current batch's header.
func (it *Iterator) Header() Header { return it.header }

// Position is where the current batch starts in the buffer, in bytes.
func (it *Iterator) Position() int { return it.position }

// Batch is the current batch's bytes, a slice of the buffer. Its capacity
// ends with the batch, so appending to it cannot overwrite the next batch.
func (it *Iterator) Batch() []byte {
	end := it.position + it.header.Size()
	return it.buffer[it.position:end:end]
}

// Err is nil if iteration ended at the end of the buffer, and otherwise the
// *Error of the batch that failed. Batches before Err().BatchPosition passed.
func (it *Iterator) Err() error {
	if it.err == nil {
		return nil
	}
	return it.err
}
