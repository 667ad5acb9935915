//! Python values into JSON: messages, tools, params and other call
//! arguments, checked as they cross (a value JSON cannot carry is a
//! `ConfigurationError` naming the argument).

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;

use super::errors::configuration_error;

/// An optional text argument: a `str` that UTF-8 can carry, or a
/// `ConfigurationError` naming the argument.
pub fn text_arg(name: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let text = value
        .cast::<PyString>()
        .map_err(|_| configuration_error(format!("{name} must be a str")))?;
    let text = text.to_cow().map_err(|_| {
        configuration_error(format!("{name} must be valid Unicode (no lone surrogates)"))
    })?;
    Ok(Some(text.into_owned()))
}

/// A Python list (`what`: the messages, the tools) -> JSON values; anything
/// JSON cannot carry is a `ConfigurationError` naming it.
pub fn list_from(what: &str, list: &Bound<'_, PyAny>) -> PyResult<Vec<Value>> {
    match json_from(what, list)? {
        Value::Array(items) => Ok(items),
        _ => Err(configuration_error(format!(
            "{what} must be a list of dicts"
        ))),
    }
}

/// Any JSON-able Python value (`what`: a dict of body fields, a response
/// format), or a `ConfigurationError` naming it.
pub fn json_from(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Value> {
    to_json(value, 0)
        .map_err(|why| configuration_error(format!("{what} cannot be sent as JSON: {why}")))
}

/// Why `value` cannot be sent as JSON, or `None`.
pub fn json_problem(value: &Bound<'_, PyAny>) -> Option<String> {
    to_json(value, 0).err()
}

fn to_json(obj: &Bound<'_, PyAny>, depth: usize) -> Result<Value, String> {
    if depth > 64 {
        return Err("nested more than 64 levels deep".into());
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        let text = s
            .to_cow()
            .map_err(|_| "text must be valid Unicode (a lone surrogate cannot be sent)")?;
        return Ok(Value::String(text.into_owned()));
    }
    if obj.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(obj.is_truthy().map_err(|e| e.to_string())?));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        return obj
            .extract::<u64>()
            .map(Value::from)
            .map_err(|_| "an integer does not fit in 64 bits".into());
    }
    if obj.is_instance_of::<PyFloat>() {
        let f: f64 = obj.extract().map_err(|e: PyErr| e.to_string())?;
        return serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| "NaN and infinity are not JSON".into());
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = serde_json::Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = k.cast::<PyString>().map_err(|_| "dict keys must be str")?;
            let key = key
                .to_cow()
                .map_err(|_| "dict keys must be valid Unicode")?;
            map.insert(key.into_owned(), to_json(&v, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let items = obj.try_iter().map_err(|e| e.to_string())?;
        return items
            .map(|item| to_json(&item.map_err(|e| e.to_string())?, depth + 1))
            .collect::<Result<_, _>>()
            .map(Value::Array);
    }
    let type_name = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    Err(format!(
        "they may hold dict, list, str, int, float, bool and None, not {type_name}"
    ))
}
