//! Page-number pagination, the one way every list is paged.

use async_graphql::InputObject;

use super::error::bad_input;
use crate::domain::limits::MAX_PAGE_END;
use crate::store::PageRequest;

/// Page size when a request names none.
pub const DEFAULT_PAGE_SIZE: u32 = 25;
/// Largest page a request may ask for.
pub const MAX_PAGE_SIZE: u32 = 100;

/// Which page of a list to return.
#[derive(InputObject, Clone, Copy, Debug, Default)]
pub struct Pagination {
    /// The page number, from 1.
    #[graphql(default = 1)]
    pub page: Option<i32>,
    /// Items per page, from 1 to 100. Default 25.
    pub page_size: Option<i32>,
}

impl Pagination {
    /// Checks the numbers and turns them into a store request.
    pub fn request(pagination: Option<Pagination>) -> async_graphql::Result<PageRequest> {
        let p = pagination.unwrap_or_default();
        let page = p.page.unwrap_or(1);
        let page_size = p.page_size.unwrap_or(DEFAULT_PAGE_SIZE as i32);
        if page < 1 {
            return Err(bad_input(format!("page must be 1 or more, got {page}")));
        }
        if !(1..=MAX_PAGE_SIZE as i32).contains(&page_size) {
            return Err(bad_input(format!(
                "pageSize must be between 1 and {MAX_PAGE_SIZE}, got {page_size}"
            )));
        }
        let end = u64::from(page as u32) * u64::from(page_size as u32);
        if end > MAX_PAGE_END {
            return Err(bad_input(format!(
                "page {page} of {page_size} would reach row {end}, beyond the {MAX_PAGE_END} a \
                 list may be read to: narrow the list (a search, a date range) instead"
            )));
        }
        Ok(PageRequest {
            page: page as u32,
            page_size: page_size as u32,
        })
    }
}
