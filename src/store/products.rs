//! Products: what a practice books or sells. An appointment type is the bookable kind of
//! product (`product_type = 'appointment'`, with a duration); services and items are sold.

use std::collections::HashMap;

use sqlx::{Any, FromRow, Transaction};

use super::audit::Event;
use super::{Change, Keyed, Page, PageRequest, PracticeStore, StoreResult, new_id, now_ms};
use crate::domain::{Bound, Invalid, Record, Refusal};

const PRODUCT_COLUMNS: &str = "id, name, product_type, status, duration, price, cost, item_code, \
                               color, comments, is_bookable, is_video_consultation, \
                               requires_payment, requires_confirmation, tax_name, tax_rate, \
                               tax_code, labels, metadata, created_at, updated_at";

/// The kind of product that can be booked.
pub const APPOINTMENT: &str = "appointment";
/// The kinds of product.
pub const PRODUCT_TYPES: &[&str] = &[APPOINTMENT, "service", "item"];
/// A product's states: an inactive one is no longer offered, and is kept for what names it.
pub const PRODUCT_STATUSES: &[&str] = &["active", "inactive"];

/// A product of the practice.
#[derive(Clone, Debug, FromRow, PartialEq)]
pub struct Product {
    pub id: String,
    pub name: String,
    /// One of [`PRODUCT_TYPES`]; fixed once made.
    pub product_type: String,
    /// One of [`PRODUCT_STATUSES`].
    pub status: String,
    /// Minutes; an appointment always has one.
    pub duration: Option<i64>,
    pub price: Option<f64>,
    pub cost: Option<f64>,
    pub item_code: Option<String>,
    pub color: Option<String>,
    pub comments: Option<String>,
    pub is_bookable: i64,
    pub is_video_consultation: i64,
    pub requires_payment: i64,
    pub requires_confirmation: i64,
    pub tax_name: Option<String>,
    /// Percent.
    pub tax_rate: Option<i64>,
    pub tax_code: Option<String>,
    /// A JSON array of label ids: see [`Product::label_ids`].
    pub labels: String,
    /// A JSON array of [key, value] pairs: see [`Product::metadata`].
    pub metadata: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Keyed for Product {
    fn key(&self) -> &str {
        &self.id
    }
}

impl Product {
    /// A new product of this type and name, active, with nothing else set: an appointment is
    /// bookable.
    pub fn new(product_type: &str, name: &str) -> Product {
        Product {
            id: String::new(),
            name: name.to_string(),
            product_type: product_type.to_string(),
            status: "active".into(),
            duration: None,
            price: None,
            cost: None,
            item_code: None,
            color: None,
            comments: None,
            is_bookable: i64::from(product_type == APPOINTMENT),
            is_video_consultation: 0,
            requires_payment: 0,
            requires_confirmation: 0,
            tax_name: None,
            tax_rate: None,
            tax_code: None,
            labels: "[]".into(),
            metadata: "[]".into(),
            created_at: 0,
            updated_at: 0,
        }
    }

    /// True for an appointment type.
    pub fn is_appointment(&self) -> bool {
        self.product_type == APPOINTMENT
    }

    /// Whether a new booking may be for it: an active, bookable appointment type.
    pub fn can_be_booked(&self) -> bool {
        self.is_appointment() && self.status == "active" && self.is_bookable != 0
    }

    /// The ids of the practice's labels on the product.
    pub fn label_ids(&self) -> Vec<String> {
        serde_json::from_str(&self.labels).unwrap_or_default()
    }

    /// The product's metadata, as (key, value) pairs in the order they were set.
    pub fn metadata(&self) -> Vec<(String, String)> {
        serde_json::from_str(&self.metadata).unwrap_or_default()
    }

    /// The product's own rules: an appointment has a duration, and only an appointment can be
    /// booked.
    fn check(&self) -> Result<(), Invalid> {
        if self.is_appointment() && self.duration.is_none() {
            return Err(Invalid::AppointmentWithoutDuration);
        }
        if !self.is_appointment() && self.is_bookable != 0 {
            return Err(Invalid::BookableNotAppointment);
        }
        Ok(())
    }
}

/// A change to a product: each field set is written, the others kept; `Some(None)` clears an
/// optional one.
#[derive(Clone, Debug, Default)]
pub struct ProductPatch {
    pub name: Option<String>,
    pub product_type: Option<String>,
    pub status: Option<String>,
    pub duration: Option<Option<i64>>,
    pub price: Option<Option<f64>>,
    pub cost: Option<Option<f64>>,
    pub item_code: Option<Option<String>>,
    pub color: Option<Option<String>>,
    pub comments: Option<Option<String>>,
    pub is_bookable: Option<bool>,
    pub is_video_consultation: Option<bool>,
    pub requires_payment: Option<bool>,
    pub requires_confirmation: Option<bool>,
    pub tax_name: Option<Option<String>>,
    pub tax_rate: Option<Option<i64>>,
    pub tax_code: Option<Option<String>>,
    /// The product's labels become exactly these; each must be in the practice's catalogue.
    pub labels: Option<Vec<String>>,
    /// The product's metadata becomes exactly these pairs.
    pub metadata: Option<Vec<(String, String)>>,
}

impl ProductPatch {
    /// Writes the patch on `p`; the product type is the caller's to check.
    pub fn apply(&self, p: &mut Product) {
        fn set<T: Clone>(field: &mut T, value: &Option<T>) {
            if let Some(value) = value {
                *field = value.clone();
            }
        }
        fn flag(field: &mut i64, value: Option<bool>) {
            if let Some(value) = value {
                *field = i64::from(value);
            }
        }
        set(&mut p.name, &self.name);
        set(&mut p.product_type, &self.product_type);
        set(&mut p.status, &self.status);
        set(&mut p.duration, &self.duration);
        set(&mut p.price, &self.price);
        set(&mut p.cost, &self.cost);
        set(&mut p.item_code, &self.item_code);
        set(&mut p.color, &self.color);
        set(&mut p.comments, &self.comments);
        flag(&mut p.is_bookable, self.is_bookable);
        flag(&mut p.is_video_consultation, self.is_video_consultation);
        flag(&mut p.requires_payment, self.requires_payment);
        flag(&mut p.requires_confirmation, self.requires_confirmation);
        set(&mut p.tax_name, &self.tax_name);
        set(&mut p.tax_rate, &self.tax_rate);
        set(&mut p.tax_code, &self.tax_code);
        if let Some(labels) = &self.labels {
            p.labels = serde_json::Value::from(labels.clone()).to_string();
        }
        if let Some(pairs) = &self.metadata {
            p.metadata = super::users::encode_pairs(pairs);
        }
    }
}

/// Which products a list holds.
#[derive(Clone, Debug, Default)]
pub struct ProductFilter {
    /// Only those whose name or item code contains this, in any case.
    pub search: Option<String>,
    /// Inactive ones too.
    pub include_inactive: bool,
}

impl PracticeStore<'_> {
    /// The practice's active, bookable appointment types, by name: what can be booked.
    pub async fn list_appointment_types(&self) -> StoreResult<Vec<Product>> {
        self.list_of_type(APPOINTMENT, false).await
    }

    /// Every appointment type of the practice, active or not, by name.
    pub async fn list_all_appointment_types(&self) -> StoreResult<Vec<Product>> {
        self.list_of_type(APPOINTMENT, true).await
    }

    async fn list_of_type(&self, kind: &str, inactive: bool) -> StoreResult<Vec<Product>> {
        let status = if inactive {
            ""
        } else {
            "AND status = 'active' AND is_bookable = 1"
        };
        let sql = format!(
            "SELECT {PRODUCT_COLUMNS} FROM products WHERE practice_id = $1 \
             AND product_type = $2 {status} ORDER BY name, id"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(kind)
            .fetch_all(self.read())
            .await?)
    }

    /// A page of the practice's products, by name.
    pub async fn list_products(
        &self,
        filter: &ProductFilter,
        page: PageRequest,
    ) -> StoreResult<Page<Product>> {
        let status = if filter.include_inactive {
            ""
        } else {
            "AND status = 'active'"
        };
        // Every product matches the pattern of no search.
        let pattern = format!(
            "%{}%",
            super::like_escape(&filter.search.as_deref().unwrap_or("").to_lowercase())
        );
        let search = "AND search_text LIKE $4 ESCAPE '\\'";
        let sql = format!(
            "SELECT {PRODUCT_COLUMNS} FROM products WHERE practice_id = $1 {status} {search} \
             ORDER BY name, id LIMIT $2 OFFSET $3"
        );
        let rows = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(page.limit())
            .bind(page.offset())
            .bind(pattern)
            .fetch_all(self.read())
            .await?;
        Ok(page.finish(rows))
    }

    /// The products with these ids.
    pub async fn products_by_ids(&self, ids: &[String]) -> StoreResult<HashMap<String, Product>> {
        self.by_ids("products", PRODUCT_COLUMNS, ids).await
    }

    /// Adds a product, with a new id (whatever `new.id` holds). Refused if another has the
    /// name, past the practice's bounds, or with a label not in the catalogue.
    pub async fn create_product(&self, mut new: Product) -> StoreResult<Change<Product>> {
        if let Err(invalid) = new.check() {
            return Ok(Err(invalid.into()));
        }
        new.id = new_id();
        let now = now_ms();
        new.created_at = now;
        new.updated_at = now;
        let mut tx = self.begin_write().await?;
        if self
            .at_bound(&mut tx, "products", "", Bound::Products)
            .await?
        {
            return Ok(Err(Refusal::TooMany(Bound::Products).into()));
        }
        if new.is_appointment()
            && self
                .at_bound(
                    &mut tx,
                    "products",
                    "AND product_type = 'appointment'",
                    Bound::AppointmentTypes,
                )
                .await?
        {
            return Ok(Err(Refusal::TooMany(Bound::AppointmentTypes).into()));
        }
        if let Some(unknown) = self.unknown_label(&mut tx, &new.label_ids()).await? {
            return Ok(Err(Refusal::NotFound(Record::Label, unknown).into()));
        }
        let sql = format!(
            "INSERT INTO products (practice_id, {PRODUCT_COLUMNS}, search_text) VALUES ($1, $2, \
             $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, \
             $21, $22, $23)"
        );
        let result = bind_product(
            sqlx::query(sqlx::AssertSqlSafe(sql)),
            self.practice_id,
            &new,
        )
        .execute(&mut *tx)
        .await;
        let taken = Refusal::Taken(Record::Product, new.name.clone());
        self.finish_unique(
            tx,
            result.map(|_| new),
            |p| Event::of("create", "product", &p.id),
            || taken,
        )
        .await
    }

    /// Changes a product. Its type is fixed once made; the rest as [`Self::create_product`].
    pub async fn update_product(
        &self,
        id: &str,
        patch: &ProductPatch,
    ) -> StoreResult<Change<Product>> {
        let mut tx = self.begin_write().await?;
        // Its labels first, as deleteLabel takes a label and then the products that have it:
        // the two wait for each other in one order, and neither deadlocks.
        if let Some(labels) = &patch.labels
            && let Some(unknown) = self.unknown_label(&mut tx, labels).await?
        {
            return Ok(Err(Refusal::NotFound(Record::Label, unknown).into()));
        }
        let sql = format!(
            "SELECT {PRODUCT_COLUMNS} FROM products WHERE practice_id = $1 AND id = $2{}",
            self.store.engine.for_update()
        );
        let found: Option<Product> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(mut product) = found else {
            return Ok(Err(
                Refusal::NotFound(Record::Product, id.to_string()).into()
            ));
        };
        if let Some(kind) = &patch.product_type
            && *kind != product.product_type
        {
            return Ok(Err(Refusal::ProductTypeFixed(product.product_type).into()));
        }
        let before = product.clone();
        patch.apply(&mut product);
        if let Err(invalid) = product.check() {
            return Ok(Err(invalid.into()));
        }
        if product == before {
            let event = Event::of("update", "product", id);
            self.commit_unchanged(tx, event).await?;
            return Ok(Ok(product));
        }
        product.updated_at = now_ms();
        let sql = format!(
            "UPDATE products SET ({PRODUCT_COLUMNS}, search_text) = ($2, $3, $4, $5, $6, $7, \
             $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23) \
             WHERE practice_id = $1 AND id = $2"
        );
        let result = bind_product(
            sqlx::query(sqlx::AssertSqlSafe(sql)),
            self.practice_id,
            &product,
        )
        .execute(&mut *tx)
        .await;
        let taken = Refusal::Taken(Record::Product, product.name.clone());
        self.finish_unique(
            tx,
            result.map(|_| product),
            |p| Event::of("update", "product", &p.id),
            || taken,
        )
        .await
    }

    /// Takes a label being deleted (in `tx`) off every product that has it; the products it
    /// changed, which are updated (their `updatedAt` and a product.updated each).
    pub(super) async fn take_label_off_products(
        &self,
        tx: &mut Transaction<'_, Any>,
        label_id: &str,
    ) -> StoreResult<Vec<String>> {
        // The lists' JSON holds the id in quotes: those that may hold it, then each looked at.
        let sql = format!(
            "SELECT id, labels FROM products WHERE practice_id = $1 AND labels LIKE $2{}",
            self.store.engine.for_update()
        );
        let quoted = serde_json::Value::from(label_id).to_string();
        let rows: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(format!("%{quoted}%"))
            .fetch_all(&mut **tx)
            .await?;
        let now = now_ms();
        let mut changed = Vec::new();
        for (id, labels) in rows {
            let mut ids: Vec<String> = serde_json::from_str(&labels).unwrap_or_default();
            let had = ids.len();
            ids.retain(|l| l != label_id);
            if ids.len() == had {
                continue;
            }
            sqlx::query(
                "UPDATE products SET labels = $3, updated_at = $4 \
                 WHERE practice_id = $1 AND id = $2",
            )
            .bind(self.practice_id)
            .bind(&id)
            .bind(serde_json::Value::from(ids).to_string())
            .bind(now)
            .execute(&mut **tx)
            .await?;
            changed.push(id);
        }
        Ok(changed)
    }

    /// The first of `ids` that is not a label of the practice's catalogue.
    async fn unknown_label(
        &self,
        tx: &mut Transaction<'_, Any>,
        ids: &[String],
    ) -> StoreResult<Option<String>> {
        self.first_unknown(tx, "labels", "", ids).await
    }

    /// The first of `ids` that is not an appointment type of the practice: what a location
    /// or a practitioner can provide.
    pub(super) async fn unknown_service(
        &self,
        tx: &mut Transaction<'_, Any>,
        ids: &[String],
    ) -> StoreResult<Option<String>> {
        self.first_unknown(tx, "products", "AND product_type = 'appointment'", ids)
            .await
    }
}

/// Binds the practice as `$1`, the product's columns, in [`PRODUCT_COLUMNS`]' order, as
/// `$2` to `$22`, and its [`search_text`] as `$23`.
fn bind_product<'q>(
    query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>,
    practice_id: &'q str,
    p: &'q Product,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments> {
    query
        .bind(practice_id)
        .bind(&p.id)
        .bind(&p.name)
        .bind(&p.product_type)
        .bind(&p.status)
        .bind(p.duration)
        .bind(p.price)
        .bind(p.cost)
        .bind(&p.item_code)
        .bind(&p.color)
        .bind(&p.comments)
        .bind(p.is_bookable)
        .bind(p.is_video_consultation)
        .bind(p.requires_payment)
        .bind(p.requires_confirmation)
        .bind(&p.tax_name)
        .bind(p.tax_rate)
        .bind(&p.tax_code)
        .bind(&p.labels)
        .bind(&p.metadata)
        .bind(p.created_at)
        .bind(p.updated_at)
        .bind(search_text(&p.name, p.item_code.as_deref()))
}

/// What a product search looks in: the name and the item code, lower-cased as the search
/// text is (Unicode's rules), one line each.
fn search_text(name: &str, item_code: Option<&str>) -> String {
    format!(
        "{}\n{}",
        name.to_lowercase(),
        item_code.unwrap_or("").to_lowercase()
    )
}

impl super::Store {
    /// Fills the search text of the products made before it existed (migration 0022): once,
    /// as the server starts; nothing to do after.
    pub(super) async fn fill_product_search(&self) -> StoreResult<()> {
        let rows: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
            "SELECT practice_id, id, name, item_code FROM products WHERE search_text IS NULL",
        )
        .fetch_all(&self.write)
        .await?;
        for (practice_id, id, name, item_code) in rows {
            sqlx::query(
                "UPDATE products SET search_text = $3 WHERE practice_id = $1 AND id = $2 \
                 AND search_text IS NULL",
            )
            .bind(practice_id)
            .bind(id)
            .bind(search_text(&name, item_code.as_deref()))
            .execute(&self.write)
            .await?;
        }
        Ok(())
    }
}

impl PracticeStore<'_> {
    /// Adds an appointment type: the shorthand of [`Self::create_product`] for a bookable
    /// appointment with a duration (minutes) and a price.
    pub async fn create_appointment_type(
        &self,
        name: &str,
        duration: i64,
        price: Option<f64>,
    ) -> StoreResult<Change<Product>> {
        let mut product = Product::new(APPOINTMENT, name);
        product.duration = Some(duration);
        product.price = price;
        self.create_product(product).await
    }
}
