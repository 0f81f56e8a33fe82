//! The practice's catalogue and settings that the record refers to: `products` and `product`,
//! `practice`, and the mutations that make products, access groups and number definitions.

use async_graphql::{Context, ID, InputObject, MaybeUndefined, Object, Result};

use super::access::{authorize, authorize_write};
use super::error::{OrFail, bad_input};
use super::input::{MAX_LINE_CHARS, optional_lines, optional_text, required_text};
use super::labels::color;
use super::objects::{
    PageInfo, Practice, PracticeAccessGroups, PracticeNumbers, Product, ProductData,
    ResponsePayload, envelope, items,
};
use super::options::QueryOptions;
use super::pagination::Pagination;
use super::staff::{MetadataEntryInput, pairs};
use super::store;
use crate::auth::OperationKind;
use crate::domain::limits::MAX_LABELS_PER_PRODUCT;
use crate::domain::{self, Refusal};
use crate::store::products::{
    PRODUCT_STATUSES, PRODUCT_TYPES, Product as StoredProduct, ProductFilter, ProductPatch,
};
use crate::text::{self, MAX_TEXT_CHARS};

/// Longest appointment: a day.
pub const MAX_DURATION_MINUTES: i32 = 24 * 60;

/// A product's fields. createProduct needs `name` and `productType` (and `duration` for an
/// appointment); updateProduct changes the fields given and keeps the others, and null clears
/// an optional one.
#[derive(InputObject, Default)]
pub struct ProductDataInput {
    /// Its name: 1 to 200 characters, unique within the practice.
    pub name: Option<String>,
    /// "appointment" (bookable, with a duration), "service" or "item"; fixed once made.
    pub product_type: Option<String>,
    /// "active" (the default) or "inactive": no longer offered, and no new booking for it.
    pub status: Option<String>,
    /// How long it takes, in minutes: 1 to 1440; an appointment needs one.
    pub duration: MaybeUndefined<i32>,
    /// Its price; not negative.
    pub price: MaybeUndefined<f64>,
    /// What it costs the practice; not negative.
    pub cost: MaybeUndefined<f64>,
    /// The practice's own code for it, at most 200 characters.
    pub item_code: MaybeUndefined<String>,
    /// Its colour: a hex colour such as "#0ea5e9".
    pub color: MaybeUndefined<String>,
    /// Notes for staff, at most 5,000 characters.
    pub comments: MaybeUndefined<String>,
    /// Whether a new booking may be for it: only an appointment can be (and is by default).
    /// The product's own setting, kept while it is inactive (when `Product.isBookable` reads
    /// false): a form that sends back what it read with `status: "active"` sends false.
    pub is_bookable: Option<bool>,
    /// True for an appointment held by video. Default false.
    pub is_video_consultation: Option<bool>,
    /// True when online booking asks for payment up front. Default false.
    pub requires_payment: Option<bool>,
    /// True when an online booking waits for the practice to confirm it. Default false.
    pub requires_confirmation: Option<bool>,
    /// The ids of the practice's labels on it (Label.id), at most 20: exactly these.
    pub labels: MaybeUndefined<Vec<ID>>,
    /// The tax on its price; null takes it off.
    pub tax: MaybeUndefined<TaxInput>,
    /// Its metadata: exactly these entries (at most 50; keys of 1 to 40 characters, values of
    /// at most 500). Past those limits the change is refused in `error`.
    pub metadata: MaybeUndefined<Vec<MetadataEntryInput>>,
}

/// The tax on a product's price.
#[derive(InputObject)]
pub struct TaxInput {
    /// Its name, e.g. "VAT"; at most 200 characters.
    pub tax_name: Option<String>,
    /// Its rate, in whole percent: 0 to 100.
    pub tax_rate: Option<i32>,
    /// The practice's code for it; at most 200 characters.
    pub tax_code: Option<String>,
}

/// An optional field of an input: undefined keeps, null clears, a value sets.
fn patch<T>(value: MaybeUndefined<T>) -> Option<Option<T>> {
    match value {
        MaybeUndefined::Undefined => None,
        MaybeUndefined::Null => Some(None),
        MaybeUndefined::Value(v) => Some(Some(v)),
    }
}

/// Checks an optional line of the input and makes it a change.
fn line(field: &str, value: MaybeUndefined<String>, max: usize) -> Result<Option<Option<String>>> {
    patch(value)
        .map(|v| optional_text(&format!("productData.{field}"), v, max))
        .transpose()
}

/// Checks an amount of money: finite and not negative.
fn amount(field: &str, value: MaybeUndefined<f64>) -> Result<Option<Option<f64>>> {
    let value = patch(value);
    if let Some(Some(v)) = value
        && !(v.is_finite() && v >= 0.0)
    {
        return Err(bad_input(format!(
            "productData.{field} must not be negative, got {v}"
        )));
    }
    Ok(value)
}

/// Checks that `value` is one of `allowed`.
fn one_of(field: &str, value: Option<String>, allowed: &[&str]) -> Result<Option<String>> {
    match value {
        Some(v) if !allowed.contains(&v.as_str()) => Err(bad_input(format!(
            "productData.{field} must be one of {}, got {v:?}",
            allowed.join(", ")
        ))),
        other => Ok(other),
    }
}

impl ProductDataInput {
    /// Checks every field given and makes them a change, with the refusal of metadata past the
    /// contract's limits when there is one.
    fn check(self) -> Result<(ProductPatch, Option<Refusal>)> {
        let name = self
            .name
            .map(|n| required_text("productData.name", n, MAX_LINE_CHARS))
            .transpose()?;
        let duration = patch(self.duration);
        if let Some(Some(minutes)) = duration
            && !(1..=MAX_DURATION_MINUTES).contains(&minutes)
        {
            return Err(bad_input(format!(
                "productData.duration must be between 1 and {MAX_DURATION_MINUTES} minutes, \
                 got {minutes}"
            )));
        }
        let color = match patch(self.color) {
            Some(value) => Some(color(value)?),
            None => None,
        };
        let labels = match patch(self.labels) {
            Some(ids) => {
                let ids: Vec<String> = ids.unwrap_or_default().into_iter().map(|i| i.0).collect();
                Some(
                    text::id_list("productData.labels", &ids, MAX_LABELS_PER_PRODUCT)
                        .map_err(bad_input)?,
                )
            }
            None => None,
        };
        // Past the contract's limits, metadata is refused in `error`, once the rest of the
        // input has been found sound.
        let metadata = match patch(self.metadata) {
            Some(entries) => {
                let entries = pairs(entries.unwrap_or_default());
                text::metadata_list("productData.metadata", &entries).map_err(bad_input)?;
                Some(entries)
            }
            None => None,
        };
        let refusal = metadata.as_deref().and_then(domain::metadata_list_refusal);
        let (tax_name, tax_rate, tax_code) = match patch(self.tax) {
            None => (None, None, None),
            Some(None) => (Some(None), Some(None), Some(None)),
            Some(Some(tax)) => {
                if let Some(rate) = tax.tax_rate
                    && !(0..=100).contains(&rate)
                {
                    return Err(bad_input(format!(
                        "productData.tax.taxRate must be from 0 to 100 percent, got {rate}"
                    )));
                }
                (
                    Some(optional_text(
                        "productData.tax.taxName",
                        tax.tax_name,
                        MAX_LINE_CHARS,
                    )?),
                    Some(tax.tax_rate.map(i64::from)),
                    Some(optional_text(
                        "productData.tax.taxCode",
                        tax.tax_code,
                        MAX_LINE_CHARS,
                    )?),
                )
            }
        };
        let patch = ProductPatch {
            name,
            product_type: one_of("productType", self.product_type, PRODUCT_TYPES)?,
            status: one_of("status", self.status, PRODUCT_STATUSES)?,
            duration: duration.map(|d| d.map(i64::from)),
            price: amount("price", self.price)?,
            cost: amount("cost", self.cost)?,
            item_code: line("itemCode", self.item_code, MAX_LINE_CHARS)?,
            color,
            comments: patch(self.comments)
                .map(|v| optional_lines("productData.comments", v, MAX_TEXT_CHARS))
                .transpose()?,
            is_bookable: self.is_bookable,
            is_video_consultation: self.is_video_consultation,
            requires_payment: self.requires_payment,
            requires_confirmation: self.requires_confirmation,
            tax_name,
            tax_rate,
            tax_code,
            labels,
            metadata,
        };
        Ok((patch, refusal))
    }
}

#[derive(Default)]
pub struct CatalogueQueries;

#[Object]
impl CatalogueQueries {
    /// A page of the practice's products, by name; inactive ones only when
    /// `options.includeDeleted`. Needs `bookings:read`.
    async fn products(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Which page; default page 1 of 25.")] pagination: Option<Pagination>,
        #[graphql(
            desc = "Text to look for, case-insensitively, in the name and the item code; at \
                    most 200 characters."
        )]
        search: Option<String>,
        #[graphql(desc = "includeDeleted: inactive products too; the other options do not apply.")]
        options: Option<QueryOptions>,
    ) -> Result<Option<ProductData>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let page = Pagination::request(pagination)?;
        let filter = ProductFilter {
            search: optional_text("search", search, MAX_LINE_CHARS)?,
            include_inactive: options.and_then(|o| o.include_deleted).unwrap_or(false),
        };
        let found = store(ctx)
            .practice(&principal.practice_id)
            .list_products(&filter, page)
            .await
            .or_fail()?;
        Ok(Some(ProductData {
            page_info: Some(PageInfo::of(page, &found)),
            data: items(found.items, Product),
        }))
    }

    /// One product of the practice, active or not; null when it has none with this id. Needs
    /// `bookings:read`.
    async fn product(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The product's id.")] id: ID,
    ) -> Result<Option<Product>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let mut found = store(ctx)
            .practice(&principal.practice_id)
            .products_by_ids(std::slice::from_ref(&id.0))
            .await
            .or_fail()?;
        Ok(found.remove(id.as_str()).map(Product))
    }

    /// The caller's practice with its settings: locations, appointment types, access groups
    /// and number definitions. Any valid token.
    async fn practice(&self, ctx: &Context<'_>) -> Result<Option<Practice>> {
        authorize(ctx, OperationKind::Query)?;
        Practice::of_caller(ctx).await.map(Some)
    }
}

#[derive(Default)]
pub struct CatalogueMutations;

#[Object]
impl CatalogueMutations {
    /// Adds a product. Refused if another has the name, a label is not in the catalogue, or
    /// the practice has 2,000 products (200 appointment types). Needs `settings`.
    async fn create_product(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The product: name and productType at least.")]
        product_data: ProductDataInput,
    ) -> Result<Option<ResponsePayload<Product>>> {
        let practice = authorize_write(ctx)?;
        let (patch, refusal) = product_data.check()?;
        let (Some(name), Some(kind)) = (&patch.name, &patch.product_type) else {
            return Err(bad_input(
                "productData.name and productData.productType are required to create a product",
            ));
        };
        if let Some(refusal) = refusal {
            return envelope(ctx, Err(refusal.into()), Product);
        }
        let mut product = StoredProduct::new(kind, name);
        patch.apply(&mut product);
        let made = practice.create_product(product).await.or_fail()?;
        envelope(ctx, made, Product)
    }

    /// Changes a product: the fields given, the others kept. Its type cannot change. Needs
    /// `settings`.
    async fn update_product(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The product's id.")] id: ID,
        #[graphql(desc = "The fields to change.")] product_data: ProductDataInput,
    ) -> Result<Option<ResponsePayload<Product>>> {
        let practice = authorize_write(ctx)?;
        let (patch, refusal) = product_data.check()?;
        if let Some(refusal) = refusal {
            return envelope(ctx, Err(refusal.into()), Product);
        }
        let changed = practice.update_product(&id, &patch).await.or_fail()?;
        envelope(ctx, changed, Product)
    }

    /// Adds an access group, which patients and staff can then be put in. Refused if another
    /// has the name, or the practice has 100. Needs `settings`.
    async fn create_access_group(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Its name: 1 to 200 characters, unique within the practice.")]
        name: String,
        #[graphql(desc = "What people read: 1 to 200 characters.")] label: String,
    ) -> Result<Option<ResponsePayload<PracticeAccessGroups>>> {
        let practice = authorize_write(ctx)?;
        let name = required_text("name", name, MAX_LINE_CHARS)?;
        let label = required_text("label", label, MAX_LINE_CHARS)?;
        let made = practice
            .create_access_group(&name, &label)
            .await
            .or_fail()?;
        envelope(ctx, made, PracticeAccessGroups::from)
    }

    /// Adds a number definition ("NHS number"), whose values patients then hold in
    /// Patient.numbers. A primary one takes the place of the practice's primary number.
    /// Refused if another has the name, or the practice has 50. Needs `settings`.
    async fn create_practice_number(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Its name: 1 to 200 characters, unique within the practice.")]
        name: String,
        #[graphql(desc = "True for the practice's main number. Default false.")] primary: Option<
            bool,
        >,
    ) -> Result<Option<ResponsePayload<PracticeNumbers>>> {
        let practice = authorize_write(ctx)?;
        let name = required_text("name", name, MAX_LINE_CHARS)?;
        let made = practice
            .create_number_definition(&name, primary.unwrap_or(false))
            .await
            .or_fail()?;
        envelope(ctx, made, PracticeNumbers::from)
    }
}
