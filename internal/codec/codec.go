// Package codec is the varint framing that tide's own byte formats share
// (metadata records and images, the controller protocol): an Encoder that
// appends, and a Decoder whose first error sticks, so decoding code reads
// straight through and checks once at the end. Every length a Decoder
// reads is checked against the bytes left before anything is allocated: a
// corrupt or hostile input gets an error wrapping ErrCorrupt, never a
// panic or an allocation its own bytes did not pay for. It is pure.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrCorrupt means bytes are not a valid encoding.
var ErrCorrupt = errors.New("corrupt encoding")

// Encoder appends to B.
type Encoder struct{ B []byte }

func (e *Encoder) Byte(v byte)      { e.B = append(e.B, v) }
func (e *Encoder) Uvarint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }
func (e *Encoder) Varint(v int64)   { e.B = binary.AppendVarint(e.B, v) }

func (e *Encoder) Bool(v bool) {
	if v {
		e.Byte(1)
	} else {
		e.Byte(0)
	}
}

// String and Bytes write a length, then the bytes.
func (e *Encoder) String(v string) { e.Uvarint(uint64(len(v))); e.B = append(e.B, v...) }
func (e *Encoder) Bytes(v []byte)  { e.Uvarint(uint64(len(v))); e.B = append(e.B, v...) }

// Decoder reads B.
type Decoder struct {
	B   []byte
	err error
}

// NewDecoder reads b.
func NewDecoder(b []byte) *Decoder { return &Decoder{B: b} }

// Err is the first error, or nil.
func (d *Decoder) Err() error { return d.err }

// Fail records err (wrapped in ErrCorrupt) unless an error came first, and
// makes every later read return a zero value.
func (d *Decoder) Fail(err error) error {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		d.B = nil
	}
	return d.err
}

// Finish fails if bytes are left over, and returns the first error.
func (d *Decoder) Finish() error {
	if d.err == nil && len(d.B) != 0 {
		d.Fail(fmt.Errorf("%d bytes after the end", len(d.B)))
	}
	return d.err
}

func (d *Decoder) Byte() byte {
	if len(d.B) < 1 {
		d.Fail(errors.New("truncated"))
		return 0
	}
	v := d.B[0]
	d.B = d.B[1:]
	return v
}

func (d *Decoder) Uvarint() uint64 {
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail(errors.New("bad varint"))
		return 0
	}
	d.B = d.B[n:]
	return v
}

func (d *Decoder) Varint() int64 {
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Fail(errors.New("bad varint"))
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Int32 and Int16 read a varint that must fit.
func (d *Decoder) Int32() int32 {
	v := d.Varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.Fail(fmt.Errorf("%d does not fit 32 bits", v))
		return 0
	}
	return int32(v)
}

func (d *Decoder) Int16() int16 {
	v := d.Varint()
	if v < math.MinInt16 || v > math.MaxInt16 {
		d.Fail(fmt.Errorf("%d does not fit 16 bits", v))
		return 0
	}
	return int16(v)
}

// Length reads a count of items of at least minBytes each, refusing one
// the remaining bytes cannot hold, or one above limit.
func (d *Decoder) Length(minBytes, limit int) int {
	v := d.Uvarint()
	if v > uint64(len(d.B)/max(1, minBytes)) || v > uint64(limit) {
		d.Fail(fmt.Errorf("length %d with %d bytes left (limit %d)", v, len(d.B), limit))
		return 0
	}
	return int(v)
}

func (d *Decoder) Bool() bool {
	switch d.Byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.Fail(errors.New("bad bool"))
	return false
}

// String reads at most limit bytes of string.
func (d *Decoder) String(limit int) string {
	n := d.Length(1, limit)
	v := string(d.B[:n])
	d.B = d.B[n:]
	return v
}

// Bytes reads at most limit bytes; the result aliases the input.
func (d *Decoder) Bytes(limit int) []byte {
	n := d.Length(1, limit)
	v := d.B[:n:n]
	d.B = d.B[n:]
	return v
}
