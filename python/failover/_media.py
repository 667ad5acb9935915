"""The options of image, speech and transcription calls, each checked when
given and put as the engine reads it (a ``_seam.MediaArgs``), and the
recording a transcription sends, read once."""

from __future__ import annotations

import os
import unicodedata
from _collections_abc import Mapping  # collections.abc's, loaded at startup

from ._checks import count, number, utf8_text
from ._exceptions import ConfigurationError
from ._seam import MediaArgs

#: What ``speak(format=)`` takes (OpenAI's names; each wire says which it has).
SPEECH_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
#: What ``transcribe(response_format=)`` takes.
TRANSCRIPT_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
#: The file extensions transcription APIs tell formats by.
AUDIO_EXTENSIONS = (
    "flac",
    "m4a",
    "mp3",
    "mp4",
    "mpeg",
    "mpga",
    "oga",
    "ogg",
    "opus",
    "wav",
    "webm",
)


def _text(option: str, value: object, *, blank: bool = False) -> str:
    if not isinstance(value, str) or (not blank and not value.strip()):
        raise ConfigurationError(f"{option} must be a non-empty str, got {value!r}")
    utf8_text(option, value)
    return value


def _optional_text(option: str, value: object) -> str | None:
    return None if value is None else _text(option, value)


def image_args(
    prompt: object, size: object, n: object, quality: object, response_format: object
) -> MediaArgs:
    """``generate_image()``'s own options, checked."""
    args = MediaArgs("image")
    args.prompt = _text("prompt", prompt)
    if size is not None:
        size = _text("size=", size)
        width, _, height = size.partition("x")
        if size != "auto" and not (width.isdigit() and height.isdigit()):
            raise ConfigurationError(
                f"size= is WIDTHxHEIGHT (e.g. '1024x1024') or 'auto', got {size!r}"
            )
    args.size = size
    args.n = count("n", n, minimum=1, maximum=10)
    args.quality = _optional_text("quality=", quality)
    if response_format not in ("b64", "url"):
        raise ConfigurationError(
            f"response_format= is 'b64' (the bytes) or 'url', got {response_format!r}"
        )
    args.urls = response_format == "url"
    return args


def speech_args(
    text: object, voice: object, format: object, speed: object, instructions: object
) -> MediaArgs:
    """``speak()``'s own options, checked."""
    args = MediaArgs("speech")
    args.text = _text("text", text)
    if isinstance(voice, Mapping):
        # By provider name: the client checks the names and expands pools.
        if not voice or not all(
            isinstance(name, str) and isinstance(each, str) and each.strip()
            for name, each in voice.items()
        ):
            raise ConfigurationError(
                "voice= as a mapping gives each provider's voice by its name, "
                f"e.g. {{'openai': 'alloy', 'gemini': 'Kore'}}, got {voice!r}"
            )
        args.voice = {name: _text("voice=", each) for name, each in voice.items()}
    elif not isinstance(voice, str) or not voice.strip():
        raise ConfigurationError(
            "voice= must be a voice name (a non-empty str, e.g. 'alloy') or each provider's "
            f"by its name ({{'openai': 'alloy', 'gemini': 'Kore'}}), got {voice!r}"
        )
    else:
        args.voice = _text("voice=", voice)
    if format not in SPEECH_FORMATS:
        raise ConfigurationError(f"format= is one of {list(SPEECH_FORMATS)}, got {format!r}")
    args.format = format
    if speed is not None:
        speed = number("speed", speed, low=0.25, high=4.0)
    args.speed = speed
    args.instructions = _optional_text("instructions=", instructions)
    return args


def transcription_args(
    audio: object,
    filename: object,
    language: object,
    prompt: object,
    response_format: object,
) -> MediaArgs:
    """``transcribe()``'s own options, checked, and the recording read once
    (retries resend it from memory)."""
    args = MediaArgs("transcription")
    data, named = _recording(audio)
    if filename is not None:
        named = _text("filename=", filename)
    if not data:
        raise ConfigurationError("audio is empty: there is nothing to transcribe")
    if named is None:
        sniffed = _sniffed_extension(data)
        if sniffed is None:
            raise ConfigurationError(
                "the recording's format cannot be told from its bytes: pass filename= "
                "with its extension (e.g. 'call.m4a')"
            )
        named = f"audio.{sniffed}"
    sent = os.path.basename(named)
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in sent):
        # It goes into the form's part header, where a line break would end it.
        raise ConfigurationError(
            f"the recording's file name has a control character or a line break: {sent!r} "
            "(pass filename= without one)"
        )
    extension = os.path.splitext(named)[1].lstrip(".").lower()
    if extension not in AUDIO_EXTENSIONS:
        raise ConfigurationError(
            f"filename= needs an audio extension the APIs know ({', '.join(AUDIO_EXTENSIONS)}), "
            f"got {named!r}"
        )
    args.audio = data
    args.filename = os.path.basename(named)
    args.language = _optional_text("language=", language)
    args.prompt = _optional_text("prompt=", prompt)
    if response_format not in TRANSCRIPT_FORMATS:
        raise ConfigurationError(
            f"response_format= is one of {list(TRANSCRIPT_FORMATS)}, got {response_format!r}"
        )
    args.response_format = response_format
    return args


def _recording(audio: object) -> tuple[bytes, str | None]:
    """The recording's bytes and its file name, if it has one: bytes as
    given, a path read, a binary file object read from where it is."""
    if isinstance(audio, (bytes, bytearray, memoryview)):
        return bytes(audio), None
    if isinstance(audio, (str, os.PathLike)):
        path = os.fspath(audio)
        if not isinstance(path, str):
            path = os.fsdecode(path)
        try:
            with open(path, "rb") as file:
                return file.read(), path
        except FileNotFoundError:
            raise ConfigurationError(f"audio: no file at {path!r}") from None
        except IsADirectoryError:
            raise ConfigurationError(f"audio: {path!r} is a directory, not a file") from None
        except OSError as error:
            raise ConfigurationError(f"audio: {path!r} cannot be read: {error}") from None
    read = getattr(audio, "read", None)
    if callable(read):
        data = read()
        if not isinstance(data, (bytes, bytearray)):
            raise ConfigurationError(
                "audio: the file object gives str: open it in binary mode ('rb')"
            )
        name = getattr(audio, "name", None)
        return bytes(data), name if isinstance(name, str) else None
    raise ConfigurationError(
        f"audio must be bytes, a path or a binary file object, got {type(audio).__name__}"
    )


def _sniffed_extension(data: bytes) -> str | None:
    """A recording's format from its first bytes, as a file extension."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return "mp3"
    if data[:4] == b"OggS":
        return "ogg"
    if data[:4] == b"fLaC":
        return "flac"
    if data[4:8] == b"ftyp":
        return "m4a"
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return "webm"
    return None
