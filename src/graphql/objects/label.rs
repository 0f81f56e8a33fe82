//! `Label`: a tag of the practice's catalogue.

use async_graphql::{ID, SimpleObject};

use super::page::PageInfo;
use crate::store::labels as stored;

/// A label of the practice's catalogue, e.g. "VIP" or "Allergy", that can be put on
/// patients with addPatientLabel.
#[derive(SimpleObject)]
pub struct Label {
    /// The label's id: what addPatientLabel takes as labelReferenceId.
    pub id: ID,
    /// The label's title, unique within the practice.
    pub title: Option<String>,
    /// The label's colour: a CSS hex colour such as "#e11d48".
    pub color: Option<String>,
}

impl From<stored::Label> for Label {
    fn from(l: stored::Label) -> Self {
        Label {
            id: ID(l.id),
            title: Some(l.title),
            color: l.color,
        }
    }
}

/// A page of labels.
#[derive(SimpleObject)]
pub struct LabelData {
    /// The labels on this page, by title.
    pub data: Option<Vec<Option<Label>>>,
    /// Where this page sits in the list.
    pub page_info: Option<PageInfo>,
}
