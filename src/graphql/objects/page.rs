//! Where a page sits in its list, and a page's items as the contract types lists.

use async_graphql::SimpleObject;

use crate::store::{Page, PageRequest};

/// A page's items as the contract types lists: `[X]`.
pub fn items<S, T>(rows: Vec<S>, wrap: impl Fn(S) -> T) -> Option<Vec<Option<T>>> {
    Some(rows.into_iter().map(|row| Some(wrap(row))).collect())
}

/// Where a page sits in its list.
#[derive(SimpleObject, Clone, Copy, Debug)]
pub struct PageInfo {
    /// This page's number, from 1.
    pub page: i32,
    /// The page size used.
    pub page_size: i32,
    /// True when a later page has items, also at row 10,000, past which a list is not read
    /// (the next page is BAD_USER_INPUT): narrow the list (a search, a range of dates) to
    /// read further. A list that stopped there without a word would look whole.
    pub has_more: bool,
}

impl PageInfo {
    pub fn of<T>(request: PageRequest, page: &Page<T>) -> PageInfo {
        PageInfo {
            page: request.page as i32,
            page_size: request.page_size as i32,
            has_more: page.has_more,
        }
    }
}
