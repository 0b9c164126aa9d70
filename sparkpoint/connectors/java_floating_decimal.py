"""The digits Java 17's ``Double.toString`` and ``Float.toString`` print (``FloatingDecimal``).

PyFlink's print sinks run on the JVM PyFlink launches; the project supports Java 17, whose
algorithm (Steele & White's digit generation with Java's own stopping rules) is not the
shortest representation that Java 19 adopted (JDK-4511638): a digit is generated past the
first even when the value is already identified, whenever the number prints in ``E`` form,
and integers of up to 63 bits are rounded to their significant bits instead. So Java 17
prints the float nearest 2.5e10 as ``2.49999995E10`` (Java 19+: ``2.5E10``) and 2.0E-3-like
doubles sometimes with a digit more than needed. This module reproduces it exactly with
Python integers (checked against ``java`` 17 on 300,000 random doubles and floats); the
layout (plain or ``E``) is ``java_format``'s.
"""

from __future__ import annotations

import math
import struct

__all__ = ["java17_digits"]

_EXP_SHIFT = 52  # the double significand's bits; a float's are moved up to them
_SIGNIF_MASK = (1 << _EXP_SHIFT) - 1
_EXP_ONE = 0x3FF0000000000000  # the bits of 1.0
_N_5_BITS = [0] + [(5**i).bit_length() for i in range(1, 27)]  # Java's N_5_BITS table
_MIN_SMALL_BIN_EXP, _MAX_SMALL_BIN_EXP = -21, 62


def java17_digits(x: float, single: bool) -> tuple[str, int]:
    """``(D, E)`` with ``x == 0.D * 10**E`` as Java 17 prints the positive finite ``x``
    (a ``float`` when ``single``; ``x`` must then already be a float32 value). ``D`` may end
    in zeros where Java's rounding carried into them (Java prints them)."""
    if single:
        (bits,) = struct.unpack(">I", struct.pack(">f", x))
        bin_exp, fract, width, bias = (bits >> 23) & 0xFF, bits & 0x7FFFFF, 23, 127
    else:
        (bits,) = struct.unpack(">Q", struct.pack(">d", x))
        bin_exp, fract, width, bias = (bits >> 52) & 0x7FF, bits & _SIGNIF_MASK, 52, 1023
    if bin_exp == 0:  # subnormal: normalise, fewer significant bits
        shift = width + 1 - fract.bit_length()
        fract <<= shift
        bin_exp = 1 - shift
        n_significant = width + 1 - shift
    else:
        fract |= 1 << width
        n_significant = width + 1
    return _dtoa(bin_exp - bias, fract << (_EXP_SHIFT - width), n_significant)


def _insignificant_digits(p2: int) -> int:
    """Java's ``insignificantDigitsForPow2``: ``floor(p2 * log10(2))`` for ``1 < p2 < 64``."""
    return p2 * 30103 // 100000 if 1 < p2 < 64 else 0


def _estimate_dec_exp(fract_bits: int, bin_exp: int) -> int:
    """Java's ``estimateDecExp``, in the same double arithmetic: floor(log10(x)) or one less."""
    (d2,) = struct.unpack(">d", struct.pack(">Q", _EXP_ONE | (fract_bits & _SIGNIF_MASK)))
    d = (d2 - 1.5) * 0.289529654 + 0.176091259 + bin_exp * 0.301029995663981
    return math.floor(d)


def _wrap(v: int, bits: int) -> int:
    """``v`` as a signed Java int (32) or long (64), overflow included."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _long_digits(lvalue: int, insignificant: int) -> tuple[str, int]:
    """Java's ``developLongDigits``: an integer rounded to its significant digits."""
    exp10 = 0
    if insignificant:
        pow10 = 10**insignificant
        lvalue, residue = divmod(lvalue, pow10)
        exp10 += insignificant
        if residue >= pow10 >> 1:
            lvalue += 1
    text = str(lvalue)
    return text.rstrip("0"), exp10 + len(text)


def _dtoa(bin_exp: int, fract_bits: int, n_significant: int) -> tuple[str, int]:
    """Java's ``BinaryToASCIIBuffer.dtoa`` for a normalised significand (bit 52 set)."""
    tail_zeros = (fract_bits & -fract_bits).bit_length() - 1
    n_fract_bits = _EXP_SHIFT + 1 - tail_zeros
    n_tiny_bits = max(0, n_fract_bits - bin_exp - 1)
    if _MIN_SMALL_BIN_EXP <= bin_exp <= _MAX_SMALL_BIN_EXP and n_tiny_bits == 0:
        # an integer below 2^63: its digits, rounded to the bits the format holds
        insignificant = 0
        if bin_exp > n_significant:
            insignificant = _insignificant_digits(bin_exp - n_significant - 1)
        if bin_exp >= _EXP_SHIFT:
            lvalue = fract_bits << (bin_exp - _EXP_SHIFT)
        else:
            lvalue = fract_bits >> (_EXP_SHIFT - bin_exp)
        return _long_digits(lvalue, insignificant)
    # x = b / s * 10^dec_exp exactly; m is half the distance to the neighbours, scaled alike
    dec_exp = _estimate_dec_exp(fract_bits, bin_exp)
    b5 = max(0, -dec_exp)
    b2 = b5 + n_tiny_bits + bin_exp
    s5 = max(0, dec_exp)
    s2 = s5 + n_tiny_bits
    m5, m2 = b5, b2 - n_significant
    fract_bits >>= tail_zeros
    b2 -= n_fract_bits - 1
    common = min(b2, s2)
    b2, s2, m2 = b2 - common, s2 - common, m2 - common
    if n_fract_bits == 1:  # a power of two: the neighbour below is half as far
        m2 -= 1
    if m2 < 0:
        b2, s2, m2 = b2 - m2, s2 - m2, 0
    b_bits = n_fract_bits + b2 + (_N_5_BITS[b5] if b5 < len(_N_5_BITS) else b5 * 3)
    s5_1 = s5 + 1
    ten_s_bits = s2 + 1 + (_N_5_BITS[s5_1] if s5_1 < len(_N_5_BITS) else s5_1 * 3)
    b = fract_bits * 5**b5 << b2
    s = 5**s5 << s2
    m = 5**m5 << m2
    ten_s = s * 10
    # Java picks int, long or FDBigInteger arithmetic by size; the machine-word paths wrap
    # (m may overflow) and stop on b + m > 10s, the big-integer path on b + m >= 10s.
    width = 0 if b_bits >= 64 or ten_s_bits >= 64 else 32 if max(b_bits, ten_s_bits) < 32 else 64
    digits: list[int] = []
    first = True
    while True:
        q, b = divmod(b, s)
        b *= 10
        m = m * 10 if width == 0 else _wrap(m * 10, width)
        if width == 0:
            low, high = b < m, b + m >= ten_s
        elif m > 0 or first:
            low, high = b < m, _wrap(b + m, width) > ten_s
        else:  # Java's guard for an overflowed m
            low = high = True
        if first:
            first = False
            if q == 0 and not high:
                dec_exp -= 1  # the estimate was one too high
            else:
                digits.append(q)
            if dec_exp < -3 or dec_exp >= 8:  # E form: at least one digit more
                low = high = False
        else:
            digits.append(q)
        if low or high:
            break
    exp10 = dec_exp + 1
    low_digit_difference = (b << 1) - ten_s
    if high and (
        not low or low_digit_difference > 0 or (low_digit_difference == 0 and digits[-1] & 1)
    ):
        exp10 += _round_up(digits)
    return "".join(map(str, digits)), exp10


def _round_up(digits: list[int]) -> int:
    """Java's ``roundup``: add one to the last digit; returns 1 when it carries out."""
    i = len(digits) - 1
    while digits[i] == 9 and i > 0:
        digits[i] = 0
        i -= 1
    if digits[i] == 9:  # 99..9 -> 10..0: the digit count stays, the exponent grows
        digits[0] = 1
        return 1
    digits[i] += 1
    return 0
